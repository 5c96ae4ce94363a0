// The export library called directly, as a front end other than the CLI would call it
// (export/export.h): import, compile, emit, write and read back.
#include <catch2/catch.hpp>
#include <cstring>
#include <memory>
#include <string>

#include "export/export.h"
#include "format/backend_ids.h"
#include "format/pte_reader.h"
#include "runtime/runtime_env.h"
#include "runtime/session.h"
#include "support/file_io.h"

using namespace etc;

namespace {

std::string example(const std::string& name) {
  return std::string(ETC_SOURCE_DIR) + "/examples/" + name;
}

std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/etc-export-test-" + name;
}

}  // namespace

TEST_CASE("export_model compiles a model for cuda:0: one delegate, its copies, a program") {
  ExportRequest request;
  request.model = example("mlp.json");
  request.options.target = Device{DeviceType::kCUDA, 0};
  Result<ExportResult> r = export_model(request);
  REQUIRE(r.ok());
  REQUIRE(r->program.program.plans.size() == 1);
  const pte::Plan& plan = r->program.program.plans[0];
  REQUIRE(plan.delegates.size() == 1);
  CHECK(plan.delegates[0].id == kCudaBackendId);
  // Host IO: the input goes up once, the output comes down once.
  REQUIRE(r->report.copies.size() == 2);
  CHECK(r->report.copies[0].kind == "h2d");
  CHECK(r->report.copies[1].kind == "d2h");
  CHECK(r->dynamic_dims.empty());
  CHECK(r->ir_dumps.empty());  // none asked for
  CHECK(r->timing_table.empty());

  // Written, read back, and the same bytes a second time.
  const std::string a = temp_path("a.pte"), b = temp_path("b.pte");
  Result<uint64_t> size = write_program(*r, a);
  REQUIRE(size.ok());
  Result<ExportResult> again = export_model(request);
  REQUIRE(again.ok());
  REQUIRE(write_program(*again, b).ok());
  Result<std::string> bytes_a = read_text_file(a), bytes_b = read_text_file(b);
  REQUIRE(bytes_a.ok());
  REQUIRE(bytes_b.ok());
  CHECK(bytes_a->size() == *size);
  CHECK(*bytes_a == *bytes_b);
  Result<pte::File> back = read_pte_file(a);
  REQUIRE(back.ok());
  CHECK(back->program.plans[0].delegates[0].id == kCudaBackendId);
  std::remove(a.c_str());
  std::remove(b.c_str());
}

TEST_CASE("export_model for the CPU delegates nothing and copies nothing") {
  ExportRequest request;
  request.model = example("cnn.json");
  request.options.target = Device{DeviceType::kCPU, 0};
  Result<ExportResult> r = export_model(request);
  REQUIRE(r.ok());
  CHECK(r->program.program.plans[0].delegates.empty());
  CHECK(r->report.copies.empty());
}

TEST_CASE("export_model asks for IR dumps and pass timings as the CLI does") {
  ExportRequest request;
  request.model = example("mlp.json");
  request.run.print_ir_after = "partition";
  request.run.time_passes = true;
  Result<ExportResult> r = export_model(request);
  REQUIRE(r.ok());
  CHECK(r->ir_dumps.find("IR after partition") != std::string::npos);
  CHECK(r->timing_table.find("plan-memory") != std::string::npos);
}

TEST_CASE("export_model's errors: located, with the CLI's categories") {
  ExportRequest request;
  SECTION("a missing model names the path") {
    request.model = temp_path("no-such-model.json");
    Result<ExportResult> r = export_model(request);
    REQUIRE_FALSE(r.ok());
    CHECK(error_code_exit_code(r.status().code()) == 1);
    CHECK(r.status().to_string().find(request.model) != std::string::npos);
  }
  SECTION("more copies than allowed: each copy listed with its cause") {
    request.model = example("mlp.json");
    request.max_copies = 1;
    Result<ExportResult> r = export_model(request);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == ErrorCode::kInvalidInput);
    CHECK(r.status().message().find("more than --max-copies 1") != std::string::npos);
    CHECK(r.status().related().size() == 2);
  }
  SECTION("input shapes for a model whose shapes are in the file is a usage error") {
    request.model = example("mlp.json");
    request.import.input_shapes["x"] = {1, 4};
    Result<ExportResult> r = export_model(request);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().code() == ErrorCode::kUsage);
  }
  SECTION("an unknown pass in the pipeline") {
    request.model = example("mlp.json");
    request.passes = "dce,no-such-pass";
    Result<ExportResult> r = export_model(request);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().to_string().find("no-such-pass") != std::string::npos);
  }
}

TEST_CASE("the frontend registry has one entry per format, each importing") {
  CHECK(frontends().size() == 3);
  ModelFormat format{};
  Result<Graph> g = import_model(example("transformer_block.json"), ImportRequest{}, &format);
  REQUIRE(g.ok());
  CHECK(format == ModelFormat::kGraphJson);
  Result<std::vector<ModelSymbol>> symbols = model_symbols(example("mlp.json"), ImportRequest{});
  REQUIRE(symbols.ok());
  CHECK(symbols->empty());
  Result<std::map<std::string, std::vector<int64_t>>> twice =
      parse_input_shapes({"x=1x2", "x=1x3"});
  REQUIRE_FALSE(twice.ok());
  CHECK(twice.status().message().find("given twice for 'x'") != std::string::npos);
}

TEST_CASE("the session API runs an exported program without the CLI") {
  ExportRequest request;
  request.model = example("mlp.json");
  request.options.target = Device{DeviceType::kCUDA, 0};  // a delegate, on the CPU reference
  Result<ExportResult> r = export_model(request);
  REQUIRE(r.ok());
  Result<std::unique_ptr<rt::OwnedRuntime>> runtime = rt::make_cpu_runtime();
  REQUIRE(runtime.ok());
  Result<std::unique_ptr<rt::Method>> method = rt::Method::load(r->program, 0, (*runtime)->env());
  REQUIRE(method.ok());
  rt::Method& m = **method;
  REQUIRE(m.num_inputs() == 1);
  rt::HostTensor x{m.input(0).dtype, m.input(0).sizes,
                   std::string(static_cast<size_t>(m.input(0).nbytes()), '\0')};
  for (size_t i = 0; i < x.bytes.size() / 4; ++i) {
    const float v = 0.01f * static_cast<float>(i % 97) - 0.3f;
    std::memcpy(x.bytes.data() + 4 * i, &v, 4);
  }
  rt::Timings timings;
  Result<std::vector<rt::HostTensor>> once =
      rt::run_method(m, (*runtime)->env(), {x}, 0, 1, &timings);
  REQUIRE(once.ok());
  REQUIRE(once->size() == 1);
  CHECK(timings.compute.size() == 1);
  // Warm-up and several iterations: the same bytes, one timing per measured iteration.
  rt::Timings three;
  Result<std::vector<rt::HostTensor>> again =
      rt::run_method(m, (*runtime)->env(), {x}, 2, 3, &three);
  REQUIRE(again.ok());
  CHECK((*again)[0].bytes == (*once)[0].bytes);
  CHECK(three.compute.size() == 3);
  // Not a decoder: generation says what it needs.
  Status s = rt::check_decoder_signature(m);
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("need a decoder program") != std::string::npos);
}
