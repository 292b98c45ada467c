#include "server/http_admission.h"

#include <algorithm>

namespace gateway {
namespace http {

ConnectionAdmission::Admission ConnectionAdmission::Add(const void* conn) {
  Admission result;
  const bool full = conns_.size() >= caps_.max_connections ||
                    pre_auth_.size() >= std::max<size_t>(caps_.max_unauthenticated, 1);
  if (full) {
    if (pre_auth_.empty()) return result;  // every slot belongs to a credential
    auto oldest = pre_auth_.begin();
    result.evict = oldest->second;
    conns_.erase(oldest->second);
    pre_auth_.erase(oldest);
  }
  const uint64_t order = next_order_++;
  conns_[conn] = Entry{order, ""};
  pre_auth_[order] = conn;
  result.admitted = true;
  return result;
}

bool ConnectionAdmission::Authenticate(const void* conn, const std::string& credential) {
  auto it = conns_.find(conn);
  if (it == conns_.end()) return false;
  Entry& entry = it->second;
  if (entry.credential == credential) return true;
  size_t& held = per_credential_[credential];
  if (held >= caps_.max_per_credential) {
    if (held == 0) per_credential_.erase(credential);
    return false;
  }
  ++held;
  if (entry.credential.empty()) {
    pre_auth_.erase(entry.order);
  } else if (--per_credential_[entry.credential] == 0) {
    per_credential_.erase(entry.credential);
  }
  entry.credential = credential;
  return true;
}

void ConnectionAdmission::Remove(const void* conn) {
  auto it = conns_.find(conn);
  if (it == conns_.end()) return;
  const Entry& entry = it->second;
  if (entry.credential.empty()) {
    pre_auth_.erase(entry.order);
  } else if (--per_credential_[entry.credential] == 0) {
    per_credential_.erase(entry.credential);
  }
  conns_.erase(it);
}

size_t ConnectionAdmission::held_by(const std::string& credential) const {
  auto it = per_credential_.find(credential);
  return it == per_credential_.end() ? 0 : it->second;
}

}  // namespace http
}  // namespace gateway
