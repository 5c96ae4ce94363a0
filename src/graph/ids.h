// Typed ids for IR objects. A Graph hands them out; they are small, stable for the
// lifetime of the object, and printed as %N (values) and #N (nodes) in dumps.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>
#include <limits>

namespace etc {

template <typename Tag>
struct Id {
  static constexpr uint32_t kInvalid = std::numeric_limits<uint32_t>::max();
  uint32_t v = kInvalid;

  constexpr Id() = default;
  constexpr explicit Id(uint32_t value) : v(value) {}
  constexpr bool valid() const { return v != kInvalid; }
  constexpr auto operator<=>(const Id&) const = default;
};

struct ValueTag;
struct NodeTag;
using ValueId = Id<ValueTag>;
using NodeId = Id<NodeTag>;

}  // namespace etc

template <typename Tag>
struct std::hash<etc::Id<Tag>> {
  size_t operator()(etc::Id<Tag> id) const noexcept { return std::hash<uint32_t>()(id.v); }
};
