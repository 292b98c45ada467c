#include "handles/sandbox_handle.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/secret_file.h"

namespace gateway {
namespace {

constexpr char kPrefix[] = "sbx1_";
constexpr char kStatePrefix[] = "rst1_";
constexpr size_t kNonceBytes = 12;
constexpr size_t kTagBytes = 16;
constexpr char kAadLabel[] = "mcp-gateway sandbox handle v1";  // and its NUL
constexpr char kJavaScriptAadLabel[] = "mcp-gateway javascript sandbox handle v1";
constexpr char kStateAadLabel[] = "mcp-gateway request state v1";

using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

CipherCtx NewCtx() { return CipherCtx(EVP_CIPHER_CTX_new(), &EVP_CIPHER_CTX_free); }

// `label` (with its NUL, which separates it from the credential) and the credential: a
// handle and a request state never open as each other.
std::string Aad(absl::string_view credential, absl::string_view label = {kAadLabel, sizeof kAadLabel}) {
  std::string aad(label.data(), label.size());
  aad.append(credential.data(), credential.size());
  return aad;
}

void PutU16(std::string& out, size_t v) {
  out.push_back(static_cast<char>((v >> 8) & 0xff));
  out.push_back(static_cast<char>(v & 0xff));
}

// Reads a 2-byte length and that many bytes from `in` at `pos`; false past the end.
bool GetField(absl::string_view in, size_t& pos, std::string& field) {
  if (in.size() - pos < 2) return false;
  const size_t n = (static_cast<unsigned char>(in[pos]) << 8) | static_cast<unsigned char>(in[pos + 1]);
  pos += 2;
  if (in.size() - pos < n) return false;
  field.assign(in.data() + pos, n);
  pos += n;
  return true;
}

// AES-256-GCM of `plain` under `key`; nonce || ciphertext || tag, or "" on a library failure.
std::string Encrypt(const HandleSealer::Key& key, absl::string_view aad, absl::string_view plain) {
  std::string out(kNonceBytes + plain.size() + kTagBytes, '\0');
  auto* bytes = reinterpret_cast<unsigned char*>(out.data());
  CipherCtx ctx = NewCtx();
  int len = 0;
  int final_len = 0;
  const bool ok =
      ctx && RAND_bytes(bytes, kNonceBytes) == 1 &&
      EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(), bytes) == 1 &&
      EVP_EncryptUpdate(ctx.get(), nullptr, &len, reinterpret_cast<const unsigned char*>(aad.data()),
                        static_cast<int>(aad.size())) == 1 &&
      EVP_EncryptUpdate(ctx.get(), bytes + kNonceBytes, &len,
                        reinterpret_cast<const unsigned char*>(plain.data()),
                        static_cast<int>(plain.size())) == 1 &&
      EVP_EncryptFinal_ex(ctx.get(), bytes + kNonceBytes + len, &final_len) == 1 &&
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, kTagBytes,
                          bytes + kNonceBytes + plain.size()) == 1;
  return ok ? out : std::string();
}

// The plaintext of nonce || ciphertext || tag under `key`, or false when it does not
// authenticate.
bool Decrypt(const HandleSealer::Key& key, absl::string_view aad, absl::string_view sealed,
             std::string& plain) {
  if (sealed.size() < kNonceBytes + kTagBytes) return false;
  const auto* bytes = reinterpret_cast<const unsigned char*>(sealed.data());
  const size_t n = sealed.size() - kNonceBytes - kTagBytes;
  plain.assign(n, '\0');
  CipherCtx ctx = NewCtx();
  int len = 0;
  int final_len = 0;
  // The tag is passed as non-const by OpenSSL's signature; it is only read.
  std::string tag(sealed.substr(kNonceBytes + n));
  return ctx &&
         EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(), bytes) == 1 &&
         EVP_DecryptUpdate(ctx.get(), nullptr, &len, reinterpret_cast<const unsigned char*>(aad.data()),
                           static_cast<int>(aad.size())) == 1 &&
         EVP_DecryptUpdate(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()), &len,
                           bytes + kNonceBytes, static_cast<int>(n)) == 1 &&
         EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, kTagBytes, tag.data()) == 1 &&
         EVP_DecryptFinal_ex(ctx.get(), reinterpret_cast<unsigned char*>(plain.data()) + len,
                             &final_len) == 1;
}

}  // namespace

HandleSealer::HandleSealer(std::vector<Key> keys, absl::Duration ttl,
                           std::function<absl::Time()> now)
    : keys_(std::move(keys)), ttl_(ttl), now_(std::move(now)) {}

absl::StatusOr<HandleSealer> HandleSealer::FromKeyText(absl::string_view text, absl::Duration ttl) {
  std::vector<Key> keys;
  for (absl::string_view word : absl::StrSplit(text, absl::ByAnyChar(" \t\r\n"), absl::SkipEmpty())) {
    if (word.size() != 64 || !std::all_of(word.begin(), word.end(), absl::ascii_isxdigit)) {
      return absl::InvalidArgumentError(
          "a handle key is 64 hex digits (32 bytes); the key file holds something else");
    }
    const std::string raw = absl::HexStringToBytes(word);
    Key key;
    std::copy(raw.begin(), raw.end(), key.begin());
    keys.push_back(key);
  }
  if (keys.empty()) return absl::InvalidArgumentError("the key file holds no handle key");
  if (keys.size() > kMaxKeys) {
    return absl::InvalidArgumentError(
        absl::StrCat("the key file holds ", keys.size(), " keys; at most ", kMaxKeys));
  }
  if (ttl <= absl::ZeroDuration()) return absl::InvalidArgumentError("--handle_ttl must be positive");
  return HandleSealer(std::move(keys), ttl);
}

absl::StatusOr<HandleSealer> HandleSealer::FromKeyFile(const std::string& path, absl::Duration ttl,
                                                      const std::string& flag) {
  absl::StatusOr<std::string> text =
      codemode::LoadOrCreateSecretFile(path, {"handle key file", "key", flag});
  if (!text.ok()) return text.status();
  absl::StatusOr<HandleSealer> sealer = FromKeyText(*text, ttl);
  if (!sealer.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", sealer.status().message()));
  return sealer;
}

std::string HandleSealer::SealFields(absl::string_view prefix, absl::string_view aad,
                                     absl::string_view first, absl::string_view second,
                                     absl::Duration ttl) const {
  if (first.size() > kMaxFieldBytes || second.size() > kMaxFieldBytes) return "";
  const int64_t expires = absl::ToUnixSeconds(now_() + ttl);
  std::string plain;
  for (int shift = 56; shift >= 0; shift -= 8) {
    plain.push_back(static_cast<char>((static_cast<uint64_t>(expires) >> shift) & 0xff));
  }
  PutU16(plain, first.size());
  plain.append(first.data(), first.size());
  PutU16(plain, second.size());
  plain.append(second.data(), second.size());
  const std::string sealed = Encrypt(keys_.front(), aad, plain);
  if (sealed.empty()) return "";
  return absl::StrCat(prefix, absl::WebSafeBase64Escape(sealed));
}

bool HandleSealer::OpenFields(absl::string_view text, absl::string_view prefix, absl::string_view aad,
                              std::string& first, std::string& second) const {
  if (text.size() > kMaxHandleBytes || !absl::ConsumePrefix(&text, prefix)) return false;
  std::string sealed;
  // Only the canonical spelling: base64's spare bits must not give one handle many names.
  if (!absl::WebSafeBase64Unescape(text, &sealed) || absl::WebSafeBase64Escape(sealed) != text) {
    return false;
  }
  std::string plain;
  bool opened = false;
  for (const Key& key : keys_) {
    if (Decrypt(key, aad, sealed, plain)) {
      opened = true;
      break;
    }
  }
  if (!opened || plain.size() < 8) return false;
  uint64_t expires = 0;
  for (size_t i = 0; i < 8; ++i) expires = (expires << 8) | static_cast<unsigned char>(plain[i]);
  size_t pos = 8;
  if (!GetField(plain, pos, first) || !GetField(plain, pos, second) || pos != plain.size()) return false;
  return absl::FromUnixSeconds(static_cast<int64_t>(expires)) > now_();
}

std::string HandleSealer::Seal(const SandboxAddress& address, absl::string_view credential) const {
  if (address.runtime == SandboxAddress::kJavaScriptRuntime) {
    return SealFields(kPrefix, Aad(credential, {kJavaScriptAadLabel, sizeof kJavaScriptAadLabel}),
                      address.endpoint, address.session_id, ttl_);
  }
  if (address.runtime != SandboxAddress::kPythonRuntime) return "";
  return SealFields(kPrefix, Aad(credential), address.endpoint, address.session_id, ttl_);
}

absl::StatusOr<SandboxAddress> HandleSealer::Open(absl::string_view handle,
                                                  absl::string_view credential) const {
  SandboxAddress address;
  if (OpenFields(handle, kPrefix, Aad(credential), address.endpoint, address.session_id)) {
    return address;
  }
  address.runtime = SandboxAddress::kJavaScriptRuntime;
  if (OpenFields(handle, kPrefix, Aad(credential, {kJavaScriptAadLabel, sizeof kJavaScriptAadLabel}),
                 address.endpoint, address.session_id)) {
    return address;
  }
  return absl::PermissionDeniedError(kInvalidHandle);
}

std::string HandleSealer::SealState(absl::string_view state, absl::string_view credential,
                                    absl::Duration ttl) const {
  return SealFields(kStatePrefix, Aad(credential, {kStateAadLabel, sizeof kStateAadLabel}), state, "", ttl);
}

absl::StatusOr<std::string> HandleSealer::OpenState(absl::string_view sealed,
                                                    absl::string_view credential) const {
  std::string state, empty;
  if (!OpenFields(sealed, kStatePrefix, Aad(credential, {kStateAadLabel, sizeof kStateAadLabel}), state, empty) ||
      !empty.empty()) {
    return absl::InvalidArgumentError(kInvalidState);
  }
  return state;
}

}  // namespace gateway
