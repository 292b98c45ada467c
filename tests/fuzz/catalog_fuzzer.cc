// libFuzzer target: a tool catalog as a gRPC client sends it in CreateSession (here in its
// JSON mapping), validated by sandboxd before it reaches a runner: names, schemas, sizes,
// and the names computed for the runner are ones it accepts.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>

#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/util/json_util.h"
#include "sandbox/v1/sandbox.pb.h"
#include "catalog/catalog.h"

namespace {

bool IsFreeName(const std::string& name) {
  return codemode::IsPythonIdentifier(name) && !codemode::IsPythonKeyword(name);
}

// The names a runner checks (docs/runner-protocol.md, "Catalog"): a catalog sandboxd
// accepts never carries a name a runner would refuse.
void CheckRunnerNames(const codemode::Catalog& catalog) {
  for (const auto& server : catalog.servers()) {
    std::set<std::string> methods;
    for (const auto& tool : server.tools) {
      if (!IsFreeName(tool.js_name) || tool.js_name == "then" ||
          !methods.insert(tool.js_name).second) {
        __builtin_trap();
      }
      std::set<std::string> taken;
      bool unnamed = false;
      for (const auto& param : tool.py_params) {
        if (param.py_name.empty()) {
          unnamed = true;
        } else if (!IsFreeName(param.py_name) || !taken.insert(param.py_name).second) {
          __builtin_trap();
        }
      }
      if (unnamed == tool.py_kwargs.empty() ||
          (unnamed && (!IsFreeName(tool.py_kwargs) || taken.count(tool.py_kwargs)))) {
        __builtin_trap();
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(nullptr);  // invalid UTF-8 is refused; no need to say so
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  sandbox::v1::Catalog proto;
  std::string json(reinterpret_cast<const char*>(data), size);
  if (!google::protobuf::util::JsonStringToMessage(json, &proto).ok()) {
    // Not the JSON mapping: try the bytes as the wire form.
    proto.Clear();
    if (!proto.ParseFromString(json)) return 0;
  }
  auto catalog = codemode::Catalog::FromProto(proto);
  if (catalog.ok()) {
    (void)catalog->ToProto();
    (void)catalog->ToRunnerJson().dump();
    CheckRunnerNames(*catalog);
  }
  return 0;
}
