#include "support/status.h"

namespace etc {

struct Status::Rep {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;
  Location location;
  std::vector<std::string> context;
  std::vector<Status> related;
  std::vector<std::string> subjects;
};

namespace {

struct CodeInfo {
  ErrorCode code;
  const char* text;
  ErrorGroup group;
  int exit_code;
};

constexpr CodeInfo kCodes[] = {
    {ErrorCode::kOk, "ok", ErrorGroup::kNone, 0},
#define ETC_ERROR_CODE(name, text, group, exit_code) \
  {ErrorCode::name, text, ErrorGroup::group, exit_code},
#include "support/error_codes.def"
#undef ETC_ERROR_CODE
};

const CodeInfo& info(ErrorCode code) {
  for (const CodeInfo& c : kCodes) {
    if (c.code == code) return c;
  }
  return kCodes[0];
}

const std::string kEmpty;
const Location kNoLocation;
const std::vector<std::string> kNoContext;
const std::vector<Status> kNoRelated;

}  // namespace

const char* error_code_name(ErrorCode code) {
  return info(code).text;
}
ErrorGroup error_code_group(ErrorCode code) {
  return info(code).group;
}
int error_code_exit_code(ErrorCode code) {
  return info(code).exit_code;
}

bool Location::empty() const {
  return file.empty() && pointer.empty() && node.empty() && !byte_offset && line == 0;
}

std::string Location::to_string() const {
  std::string out = file;
  if (line > 0) {
    out += ":" + std::to_string(line);
    if (column > 0) out += ":" + std::to_string(column);
  }
  auto sep = [&out] {
    if (!out.empty()) out += out.back() == ':' ? " " : ": ";
  };
  if (byte_offset) {
    sep();
    out += "byte " + std::to_string(*byte_offset);
  }
  if (!pointer.empty()) {
    sep();
    out += pointer;
  }
  if (!node.empty()) {
    out += out.empty() ? "" : " ";
    out += "(node \"" + node + "\")";
  }
  return out;
}

void Status::RepDeleter::operator()(Rep* rep) const noexcept {
  delete rep;
}

Status::Status(ErrorCode code, std::string message, Location location) {
  if (code == ErrorCode::kOk) return;
  rep_.reset(new Rep());
  rep_->code = code;
  rep_->message = std::move(message);
  rep_->location = std::move(location);
}

Status::Status(const Status& other) : rep_(other.rep_ ? new Rep(*other.rep_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) rep_.reset(other.rep_ ? new Rep(*other.rep_) : nullptr);
  return *this;
}

Status::Status(Status&&) noexcept = default;
Status& Status::operator=(Status&&) noexcept = default;
Status::~Status() = default;

ErrorCode Status::code() const {
  return rep_ ? rep_->code : ErrorCode::kOk;
}
const std::string& Status::message() const {
  return rep_ ? rep_->message : kEmpty;
}
const Location& Status::location() const {
  return rep_ ? rep_->location : kNoLocation;
}
const std::vector<std::string>& Status::context() const {
  return rep_ ? rep_->context : kNoContext;
}
const std::vector<Status>& Status::related() const {
  return rep_ ? rep_->related : kNoRelated;
}

const std::vector<std::string>& Status::subjects() const {
  static const std::vector<std::string> kNone;
  return rep_ ? rep_->subjects : kNone;
}
Status& Status::set_subjects(std::vector<std::string> subjects) & {
  if (rep_) rep_->subjects = std::move(subjects);
  return *this;
}
Status Status::set_subjects(std::vector<std::string> subjects) && {
  set_subjects(std::move(subjects));
  return std::move(*this);
}

Status& Status::add_context(std::string context) & {
  if (rep_) rep_->context.push_back(std::move(context));
  return *this;
}
Status Status::add_context(std::string context) && {
  return std::move(add_context(std::move(context)));
}

Status& Status::add_location(const Location& outer) & {
  if (!rep_) return *this;
  Location& loc = rep_->location;
  if (loc.file.empty()) {
    loc.file = outer.file;
    if (loc.line == 0) {
      loc.line = outer.line;
      loc.column = outer.column;
    }
  }
  if (loc.pointer.empty()) loc.pointer = outer.pointer;
  if (loc.node.empty()) loc.node = outer.node;
  if (!loc.byte_offset) loc.byte_offset = outer.byte_offset;
  for (Status& r : rep_->related)
    r.add_location(outer);
  return *this;
}
Status Status::add_location(const Location& outer) && {
  return std::move(add_location(outer));
}

void Status::add_related(Status other) {
  if (rep_ && !other.ok()) rep_->related.push_back(std::move(other));
}

std::string Status::to_string() const {
  if (!rep_) return "ok";
  std::string loc = rep_->location.to_string();
  std::string out = loc.empty() ? rep_->message : loc + ": " + rep_->message;
  for (const Status& r : rep_->related)
    out += "\n" + r.to_string();
  for (const std::string& c : rep_->context)
    out += "\n  note: " + c;
  return out;
}

Status invalid_input(std::string message, Location location) {
  return Status(ErrorCode::kInvalidInput, std::move(message), std::move(location));
}
Status unsupported(std::string message, Location location) {
  return Status(ErrorCode::kUnsupported, std::move(message), std::move(location));
}
Status not_found(std::string message, Location location) {
  return Status(ErrorCode::kNotFound, std::move(message), std::move(location));
}
Status internal_error(std::string message, Location location) {
  return Status(ErrorCode::kInternal, std::move(message), std::move(location));
}

}  // namespace etc
