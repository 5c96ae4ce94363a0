// The .pte writer and reader: round trips, determinism, device fields exactly where
// ExecuTorch puts them, ExecuTorch-written fixtures, and corrupt files.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>

#include "passes/graph_builder.h"
#include "serialize/emitter.h"
#include "serialize/pte_dump.h"
#include "serialize/pte_reader.h"
#include "serialize/pte_writer.h"

namespace etc {
namespace {

using testing::add;
using testing::f32;
using testing::graph_from_json;

const std::string kSource = ETC_SOURCE_DIR;

Graph compile(const std::string& model, ExportOptions options = {}) {
  Result<Graph> g = load_graph_file(model);
  INFO(g.status().to_string());
  REQUIRE(g.ok());
  PassRegistry r = make_pass_registry();
  ExportReport report;
  PassContext ctx{options, report};
  PipelineRunOptions run;
  run.verify_each = true;
  Result<PipelineResult> res =
      run_pipeline(*g, *parse_pipeline(kDefaultExportPipeline, r), r, ctx, run);
  INFO(res.status().to_string());
  REQUIRE(res.ok());
  return std::move(g).value();
}

std::string to_bytes(const Graph& g) {
  Result<pte::File> f = emit_program(g);
  INFO(f.status().to_string());
  REQUIRE(f.ok());
  Result<std::string> bytes = write_pte(*f);
  REQUIRE(bytes.ok());
  return *bytes;
}

pte::File read(const std::string& bytes) {
  Result<pte::File> f = read_pte(make_blob(bytes), "mem.pte");
  INFO(f.status().to_string());
  REQUIRE(f.ok());
  return std::move(f).value();
}

TEST_CASE("every example exports, reads back and dumps identically") {
  for (const char* name : {"mlp", "cnn", "transformer_block"}) {
    INFO(name);
    Graph g = compile(kSource + "/examples/" + name + ".json");
    Result<pte::File> emitted = emit_program(g);
    REQUIRE(emitted.ok());
    std::string bytes = *write_pte(*emitted);
    pte::File back = read(bytes);
    CHECK(back.program.plans == emitted->program.plans);
    CHECK(back.program.named_data == emitted->program.named_data);
    CHECK(back.program.segments == emitted->program.segments);
    // Writing what was read gives the same bytes.
    CHECK(*write_pte(back) == bytes);
  }
}

TEST_CASE("exports are byte-for-byte deterministic") {
  for (const char* name : {"mlp", "cnn", "transformer_block"}) {
    INFO(name);
    std::string a = to_bytes(compile(kSource + "/examples/" + name + ".json"));
    std::string b = to_bytes(compile(kSource + "/examples/" + name + ".json"));
    CHECK(a == b);
  }
}

TEST_CASE("the file layout: identifier, extended header, aligned segments") {
  std::string bytes = to_bytes(compile(kSource + "/examples/mlp.json"));
  REQUIRE(bytes.size() > 64);
  CHECK(bytes.substr(4, 4) == "ET12");
  CHECK(bytes.substr(8, 4) == "eh00");
  pte::File f = read(bytes);
  REQUIRE(f.header.has_value());
  CHECK(f.header->length == 32);
  CHECK(f.header->segment_base_offset % 128 == 0);
  CHECK(f.header->segment_base_offset + f.header->segment_data_size == bytes.size());
  for (const pte::Segment& s : f.program.segments) {
    CHECK((f.header->segment_base_offset + s.offset) % 128 ==
          0);  // aligned in the file, not only relatively
  }
}

TEST_CASE("CUDA delegate IO is tagged cuda:0; host tensors carry no device info at all") {
  Graph g = compile(kSource + "/examples/mlp.json");
  pte::File f = read(to_bytes(g));
  const pte::Plan& p = f.program.plans[0];
  REQUIRE(p.buffer_devices.size() == 1);
  CHECK(p.buffer_devices[0] == pte::BufferDevice{2, Device{DeviceType::kCUDA, 0}});
  int cuda = 0, cpu = 0;
  for (const pte::EValue& v : p.values) {
    if (v.kind != pte::ValueKind::kTensor) continue;
    if (v.tensor.device.is_cpu()) {
      ++cpu;
      CHECK_FALSE(v.tensor.has_extra);
    } else {
      ++cuda;
      CHECK(v.tensor.has_extra);
      CHECK(v.tensor.allocation->memory_id == 2);
    }
  }
  CHECK(cuda == 2);  // the delegate's input and output
  CHECK(cpu == 2);   // graph input and output on the host
  REQUIRE(p.delegates.size() == 1);
  CHECK(p.delegates[0].compile_specs == std::vector<pte::CompileSpec>{{"target_device", "cuda:0"}});
}

TEST_CASE("a CPU-only export has no device fields and runs only portable kernels") {
  ExportOptions cpu;
  cpu.target = Device{};
  Graph g = compile(kSource + "/examples/cnn.json", cpu);
  std::string bytes = to_bytes(g);
  pte::File f = read(bytes);
  const pte::Plan& p = f.program.plans[0];
  CHECK(p.buffer_devices.empty());
  CHECK(p.delegates.empty());
  for (const pte::EValue& v : p.values)
    CHECK_FALSE(v.tensor.has_extra);
  for (const pte::Operator& op : p.operators) {
    CHECK(op.name.rfind("aten::", 0) == 0);
    CHECK(op.overload.find("out") != std::string::npos);  // out variants only
  }
  // linear/hardswish/max_pool2d were decomposed for ExecuTorch's kernel set.
  std::string text = dump_text(f);
  CHECK(text.find("aten::max_pool2d_with_indices.out") != std::string::npos);
  CHECK(text.find("aten::addmm.out") != std::string::npos);
  CHECK(text.find("linear") == std::string::npos);
  CHECK(text.find("hardswish") == std::string::npos);
}

TEST_CASE("ExecuTorch's add.pte reads as its README describes") {
  Result<pte::File> f = read_pte_file(kSource + "/../shared/fixtures/executorch/add.pte");
  INFO(f.status().to_string());
  REQUIRE(f.ok());
  const pte::Plan& p = f->program.plans[0];
  CHECK(p.name == "forward");
  CHECK(p.buffer_sizes == std::vector<int64_t>{0, 48});
  REQUIRE(p.operators.size() == 1);
  CHECK(p.operators[0] == pte::Operator{"aten::add", "out"});
  REQUIRE(p.chains[0].instructions.size() == 1);
  const std::vector<int32_t>& args = p.chains[0].instructions[0].args;
  REQUIRE(args.size() == 5);
  CHECK(args[3] == args[4]);  // out passed twice
  CHECK(p.values[static_cast<size_t>(args[2])].i == 1);
  for (int i = 0; i < 3; ++i)
    CHECK(p.values[static_cast<size_t>(i)].tensor.allocation->offset == 16u * i);
}

TEST_CASE("ExecuTorch's inline constant_buffer program reads with its constants") {
  Result<pte::File> f =
      read_pte_file(kSource + "/../shared/fixtures/executorch/module_linear_constant_buffer.pte");
  INFO(f.status().to_string());
  REQUIRE(f.ok());
  CHECK_FALSE(f->header.has_value());
  REQUIRE(f->program.constant_buffer.size() == 3);
  CHECK(f->program.constant_buffer[0].size == 0);
  const pte::Plan& p = f->program.plans[0];
  auto constant_floats = [&](uint32_t idx) {
    std::span<const uint8_t> b = f->constant_bytes(idx);
    std::vector<float> v(4);
    REQUIRE(b.size() >= 16);
    std::memcpy(v.data(), b.data(), 16);
    return v;
  };
  CHECK(constant_floats(p.values[0].tensor.data_buffer_idx) == std::vector<float>(4, 3.0f));
  CHECK(constant_floats(p.values[1].tensor.data_buffer_idx) == std::vector<float>(4, 2.0f));
}

TEST_CASE("damaged headers and identifiers are rejected with the byte offset") {
  std::string good = to_bytes(compile(kSource + "/examples/mlp.json"));
  auto error = [](std::string bytes) {
    Result<pte::File> f = read_pte(make_blob(std::move(bytes)), "x.pte");
    REQUIRE_FALSE(f.ok());
    return f.status().to_string();
  };
  CHECK(error("abc") == "x.pte: byte 0: file is 3 bytes, too short for a .pte");
  std::string bad_id = good;
  bad_id.replace(4, 4, "XX12");
  CHECK(error(bad_id) == "x.pte: byte 4: not a .pte file: identifier is 'XX12', expected 'ET12'");
  std::string old_id = good;
  old_id.replace(4, 4, "ET11");
  CHECK(error(old_id) == "x.pte: byte 4: incompatible .pte version 'ET11' (this etc reads ET12)");
  std::string short_header = good;
  short_header[12] = 16;
  CHECK(error(short_header) ==
        "x.pte: byte 12: extended header length 16 is below the minimum of 24");
  std::string big_program = good;
  big_program[23] = 0x7f;
  CHECK(error(big_program).rfind("x.pte: byte 16: extended header program_size", 0) == 0);
  CHECK(error(good.substr(0, good.size() - 1)).find("runs past the end of the file") !=
        std::string::npos);
}

TEST_CASE("truncations and random corruption never crash the reader or the dumps") {
  std::string good = to_bytes(compile(kSource + "/examples/transformer_block.json"));
  std::mt19937 rng(7);
  int rejected = 0, accepted = 0;
  auto probe = [&](std::string bytes) {
    Result<pte::File> f = read_pte(make_blob(std::move(bytes)), "x.pte");
    if (!f.ok()) {
      CHECK(f.status().code() != ErrorCode::kInternal);
      ++rejected;
      return;
    }
    ++accepted;
    (void)dump_text(*f);
    (void)dump_json(*f);
    (void)dump_dot(*f);
  };
  for (int i = 0; i < 64; ++i)
    probe(good.substr(0, good.size() * static_cast<size_t>(i) / 64));
  for (int i = 0; i < 400; ++i) {
    std::string bytes = good;
    int flips = 1 + static_cast<int>(rng() % 8);
    // Hit the FlatBuffer region most of the time: that is where structure lives.
    size_t region = rng() % 4 == 0 ? bytes.size() : std::min<size_t>(bytes.size(), 4096);
    for (int k = 0; k < flips; ++k)
      bytes[rng() % region] ^= static_cast<char>(1 << (rng() % 8));
    probe(std::move(bytes));
  }
  CHECK(rejected > 64);  // every truncation but the empty prefix check is an error
  INFO("accepted " << accepted);
}

TEST_CASE("inputs the fuzzer found are read without undefined behaviour") {
  // Each file in test/serialize/regressions made fuzz_pte fail once; under the sanitizer
  // build (make test-sanitize) reading them must stay clean. misaligned_int64_vector.pte: an
  // inserted byte left an 8-byte vector's elements at 4 mod 8 (the FlatBuffers verifier only
  // checks the length field's alignment).
  for (const char* name : {"misaligned_int64_vector.pte"}) {
    INFO(name);
    Result<std::shared_ptr<const Blob>> blob =
        map_file(kSource + std::string("/test/serialize/regressions/") + name);
    REQUIRE(blob.ok());
    auto bytes = (*blob)->bytes();
    Result<pte::File> f = read_pte(make_blob(std::string(bytes.begin(), bytes.end())), name);
    if (f.ok()) {
      (void)dump_text(*f);
      (void)dump_json(*f);
    } else {
      CHECK(f.status().code() != ErrorCode::kInternal);
    }
  }
}

TEST_CASE("the delegate blob decodes with its plan, constants and device workspace") {
  Graph g = compile(kSource + "/examples/transformer_block.json");
  pte::File f = read(to_bytes(g));
  const pte::Delegate& d = f.program.plans[0].delegates.at(0);
  Result<DelegateProgram> dp = read_delegate_program(f.delegate_bytes(d), "delegate");
  INFO(dp.status().to_string());
  REQUIRE(dp.ok());
  CHECK(dp->version == kDelegateFormatVersion);
  CHECK(dp->plan.inputs.size() == 1);
  CHECK(dp->plan.outputs.size() == 1);
  CHECK(dp->constants.size() == 16);
  for (const auto& [value, key] : dp->constants)
    CHECK(f.named_bytes(key).has_value());
  REQUIRE(dp->plan.buffer_devices.size() == 1);
  CHECK(dp->plan.buffer_devices[0].device == Device{DeviceType::kCUDA, 0});
  CHECK(dp->plan.buffer_sizes[1] > 0);
  CHECK(read_delegate_program({}, "x").status().message() ==
        "not an etc CUDA delegate blob (identifier ECD1 missing)");
}

}  // namespace
}  // namespace etc
