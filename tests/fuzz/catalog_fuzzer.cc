// libFuzzer target: a tool catalog as a gRPC client sends it in CreateSession (here in its
// JSON mapping), validated by sandboxd before it reaches a runner: names, schemas, sizes.
#include <cstddef>
#include <cstdint>
#include <string>

#include "google/protobuf/stubs/logging.h"
#include "google/protobuf/util/json_util.h"
#include "sandbox/v1/sandbox.pb.h"
#include "catalog/catalog.h"

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
  }
  return 0;
}
