// Header values of stateless MCP (2026-07-28; SEP-2243): the standard headers (Mcp-Method,
// Mcp-Name) and the Mcp-Param-* headers repeat values from the body, and a value that is
// not plain printable ASCII travels as "=?base64?<base64 of its UTF-8>?=".
//
//   EncodeHeaderValue("us-west1")  == "us-west1"
//   EncodeHeaderValue(" padded ")  == "=?base64?IHBhZGRlZCA=?="
//   DecodeHeaderValue("=?base64?IHBhZGRlZCA=?=", &v) -> true, v == " padded "
#pragma once

#include <string>

namespace gateway {

// `value` as a header value: as it is when every byte is printable ASCII (0x20-0x7e), it
// neither begins nor ends with a space and does not begin with "=?"; else the base64
// sentinel.
std::string EncodeHeaderValue(const std::string& value);

// A received header value as the specification compares it: spaces and tabs around it
// removed, and a "=?base64?<base64>?=" value decoded (canonical base64 only: whole quanta,
// the standard alphabet, padding at the end). False when that base64 is invalid.
bool DecodeHeaderValue(std::string value, std::string* out);

}  // namespace gateway
