#include "sandboxd/session_records.h"

#include <limits>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "nlohmann/json.hpp"

namespace sandboxd {
namespace {

using nlohmann::json;

std::string ProtoToJson(const google::protobuf::Message& m) {
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(m, &out);
  return out;
}

}  // namespace

// The shape records have had since the first release: the two protos as JSON strings.
std::string EncodeSessionRecord(const SessionRecord& record) {
  json rec = {{"session", ProtoToJson(record.session)},
              {"catalog", ProtoToJson(record.catalog)},
              {"container_name", record.container_name},
              {"egress_bytes_used", record.egress_bytes_used}};
  if (record.init) {
    rec["init_pid"] = record.init->pid;
    rec["init_start_time"] = record.init->start_time;
  }
  return rec.dump();
}

absl::StatusOr<SessionRecord> DecodeSessionRecord(const std::string& contents) {
  // The state directory is sandboxd's own (0700), but a record is still parsed as input
  // that may be damaged: no exceptions, no assumptions about types.
  json rec = json::parse(contents, nullptr, /*allow_exceptions=*/false);
  auto string_field = [&](const char* name) -> const std::string* {
    if (!rec.is_object()) return nullptr;
    auto it = rec.find(name);
    return it != rec.end() && it->is_string() ? it->get_ptr<const std::string*>() : nullptr;
  };
  const std::string* session = string_field("session");
  const std::string* catalog = string_field("catalog");
  const std::string* container = string_field("container_name");
  if (!session || !catalog || !container || container->empty()) {
    return absl::DataLossError("unreadable record");
  }
  SessionRecord out;
  out.container_name = *container;
  if (auto used = rec.find("egress_bytes_used"); used != rec.end()) {
    out.egress_bytes_used =
        used->is_number_unsigned() ? used->get<uint64_t>() : std::numeric_limits<uint64_t>::max();
  }
  auto pid = rec.find("init_pid");
  auto start = rec.find("init_start_time");
  if (pid != rec.end() && start != rec.end() && pid->is_number_unsigned() &&
      start->is_number_unsigned() && pid->get<uint64_t>() > 0 &&
      pid->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<pid_t>::max()) &&
      start->get<uint64_t>() > 0) {
    out.init = ProcessRef{static_cast<pid_t>(pid->get<uint64_t>()), start->get<uint64_t>()};
  }
  if (!google::protobuf::util::JsonStringToMessage(*session, &out.session).ok() ||
      !google::protobuf::util::JsonStringToMessage(*catalog, &out.catalog).ok()) {
    return absl::DataLossError("unreadable record");
  }
  return out;
}

absl::Status SessionRecords::Add(const std::string& id, const Snapshot& snapshot) {
  codemode::MutexLock lock(&mu_);
  absl::Status st = store_->Put(id, EncodeSessionRecord(snapshot()));
  if (st.ok()) live_.insert(id);
  return st;
}

absl::Status SessionRecords::Update(const std::string& id, const Snapshot& snapshot) {
  codemode::MutexLock lock(&mu_);
  if (!live_.count(id)) return absl::OkStatus();
  return store_->Put(id, EncodeSessionRecord(snapshot()));
}

absl::Status SessionRecords::Remove(const std::string& id) {
  codemode::MutexLock lock(&mu_);
  live_.erase(id);
  return store_->Delete(id);
}

absl::StatusOr<SessionRecords::Loaded> SessionRecords::Load() {
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> all = store_->List();
  if (!all.ok()) return all.status();
  Loaded out;
  for (auto& [key, contents] : *all) {
    absl::StatusOr<SessionRecord> rec = DecodeSessionRecord(contents);
    if (!rec.ok()) {
      out.broken.emplace_back(key, std::string(rec.status().message()));
    } else if (rec->session.id() != key) {
      out.broken.emplace_back(key, "the record names another session");
    } else {
      out.records.push_back(std::move(*rec));
    }
  }
  return out;
}

void SessionRecords::Adopt(const std::string& id) {
  codemode::MutexLock lock(&mu_);
  live_.insert(id);
}

}  // namespace sandboxd
