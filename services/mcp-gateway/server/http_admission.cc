#include "server/http_admission.h"

#include <algorithm>
#include <utility>

namespace gateway {
namespace http {

namespace {

// A resolver's answer as a peer: never "", which stands for "not resolved yet".
std::string PeerOrUnknown(std::string peer) { return peer.empty() ? "unknown" : peer; }

}  // namespace

ConnectionAdmission::Admission ConnectionAdmission::Add(const void* conn, const std::string& peer,
                                                        const HasUnreadInput& has_unread_input) {
  return AddEntry(conn, PeerOrUnknown(peer), nullptr, has_unread_input);
}

ConnectionAdmission::Admission ConnectionAdmission::AddUnresolved(
    const void* conn, PeerResolver resolve, const HasUnreadInput& has_unread_input) {
  if (!resolve) return Add(conn, "unknown", has_unread_input);
  return AddEntry(conn, "", std::move(resolve), has_unread_input);
}

void ConnectionAdmission::ResolvePreAuthPeers() {
  auto unresolved = pre_auth_.find("");
  if (unresolved == pre_auth_.end()) return;
  const std::map<uint64_t, const void*> waiting = std::move(unresolved->second);
  pre_auth_.erase(unresolved);
  for (const auto& [order, conn] : waiting) {
    Entry& entry = conns_.at(conn);
    entry.peer = PeerOrUnknown(entry.resolve());
    entry.resolve = nullptr;
    pre_auth_[entry.peer][order] = conn;
  }
}

ConnectionAdmission::Admission ConnectionAdmission::AddEntry(const void* conn, std::string peer,
                                                             PeerResolver resolve,
                                                             const HasUnreadInput& has_unread_input) {
  Admission result;
  const bool full = conns_.size() >= caps_.max_connections ||
                    pre_auth_count_ >= std::max<size_t>(caps_.max_unauthenticated, 1);
  if (full) {
    if (pre_auth_count_ == 0) return result;  // every slot belongs to a credential
    // Choosing among peers needs every peer, the new one's too (it wins a tie).
    ResolvePreAuthPeers();
    if (peer.empty()) {
      peer = PeerOrUnknown(resolve());
      resolve = nullptr;
    }
    // The peer holding the most pre-auth connections; the new one's own on a tie.
    auto most = pre_auth_.find(peer);
    for (auto it = pre_auth_.begin(); it != pre_auth_.end(); ++it) {
      if (most == pre_auth_.end() || it->second.size() > most->second.size()) most = it;
    }
    auto& mine = most->second;
    auto victim = mine.begin();
    if (has_unread_input) {
      auto it = mine.begin();
      for (size_t i = 0; i < kEvictionCandidates && it != mine.end(); ++i, ++it) {
        if (!has_unread_input(it->second)) {
          victim = it;
          break;
        }
      }
    }
    result.evict = victim->second;
    auto entry = conns_.find(victim->second);
    ForgetPreAuth(entry->second);
    conns_.erase(entry);
  }
  const uint64_t order = next_order_++;
  pre_auth_[peer][order] = conn;
  conns_[conn] = Entry{order, std::move(peer), std::move(resolve), ""};
  ++pre_auth_count_;
  result.admitted = true;
  return result;
}

void ConnectionAdmission::ForgetPreAuth(const Entry& entry) {
  auto it = pre_auth_.find(entry.peer);
  if (it == pre_auth_.end() || it->second.erase(entry.order) == 0) return;
  --pre_auth_count_;
  if (it->second.empty()) pre_auth_.erase(it);
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
    ForgetPreAuth(entry);
    entry.resolve = nullptr;  // never pre-auth again: its peer no longer matters
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
    ForgetPreAuth(entry);
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
