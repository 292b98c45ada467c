#include "sandboxd/uid_pool.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace sandboxd {

std::shared_ptr<UidPool::Lease> UidPool::Acquire(const std::set<uint32_t>& busy) {
  codemode::MutexLock lock(&mu_);
  for (uint32_t uid = first_; uid < first_ + count_; ++uid) {
    if (leased_.count(uid) || busy.count(uid)) continue;
    auto lease = std::make_shared<Lease>(shared_from_this(), uid);
    leased_[uid] = lease;
    return lease;
  }
  return nullptr;
}

std::shared_ptr<UidPool::Lease> UidPool::Claim(uint32_t uid) {
  codemode::MutexLock lock(&mu_);
  if (auto it = leased_.find(uid); it != leased_.end()) {
    if (auto lease = it->second.lock()) return lease;
  }
  auto lease = std::make_shared<Lease>(shared_from_this(), uid);
  if (uid >= first_ && uid < first_ + count_) leased_[uid] = lease;
  return lease;
}

void UidPool::Release(uint32_t uid) {
  codemode::MutexLock lock(&mu_);
  auto it = leased_.find(uid);
  // Only if no newer lease took the uid meanwhile (a Claim after this lease expired).
  if (it != leased_.end() && it->second.expired()) leased_.erase(it);
}

std::set<uint32_t> UidsWithProcesses(uint32_t first, uint32_t count) {
  std::set<uint32_t> busy;
  std::error_code ec;
  for (const std::filesystem::directory_entry& e : std::filesystem::directory_iterator("/proc", ec)) {
    int pid = 0;
    if (!absl::SimpleAtoi(e.path().filename().string(), &pid) || pid <= 0) continue;
    std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("Uid:", 0) != 0) continue;
      std::istringstream ids(line.substr(4));
      for (uint64_t id; ids >> id;) {
        if (id >= first && id < uint64_t{first} + count) busy.insert(static_cast<uint32_t>(id));
      }
      break;
    }
  }
  return busy;
}

}  // namespace sandboxd
