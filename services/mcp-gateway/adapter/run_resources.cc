// The files runs leave, as MCP resources. See run_resources.h.
#include "adapter/run_resources.h"

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/time/time.h"
#include "base/untrusted_json.h"
#include "bridge/produced_files.h"

namespace gateway {
namespace {

using nlohmann::json;

// A list's _meta key saying which sandboxes' files are missing from it, when some are.
constexpr const char* kMetaIncomplete = "codemode/incomplete";

// A Resource object (resources/list) of a listed file.
json ResourceOf(const ListedFile& listed) {
  const OutFile& file = listed.file;
  json resource = {{"uri", listed.uri},
                   {"name", file.path},
                   {"title", listed.title},
                   {"mimeType", MimeTypeForPath(file.path)},
                   {"size", file.size}};
  if (file.mtime_ms > 0) {
    resource["annotations"] = {
        {"lastModified", absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(file.mtime_ms),
                                          absl::UTCTimeZone())}};
  }
  return resource;
}

// The result of resources/list for a page of files.
absl::StatusOr<json> ListResult(const absl::StatusOr<FilePage>& page) {
  if (!page.ok()) return page.status();
  json resources = json::array();
  for (const ListedFile& listed : page->files) resources.push_back(ResourceOf(listed));
  json result = {{"resources", std::move(resources)}};
  if (!page->next_cursor.empty()) result["nextCursor"] = page->next_cursor;
  if (!page->incomplete.empty()) result["_meta"] = {{kMetaIncomplete, page->incomplete}};
  return result;
}

}  // namespace

absl::StatusOr<json> RunResources::ListResources(const std::string& session_key, const std::string& cursor) {
  return ListResult(service_->workspace().List(session_key, cursor));
}

absl::StatusOr<json> RunResources::ListResourceTemplates(const std::string& session_key) {
  json templates = json::array();
  for (const FileTemplate& t : service_->workspace().Templates(session_key)) {
    templates.push_back(
        {{"uriTemplate", t.uri_template}, {"name", t.name}, {"title", t.title}, {"description", t.description}});
  }
  return json{{"resourceTemplates", std::move(templates)}};
}

absl::StatusOr<json> RunResources::ReadResource(const std::string& uri, ToolCallContext& context) {
  absl::StatusOr<FileRead> file = service_->workspace().Read(context.mcp_session.value_or(""), context.credential,
                                                             uri, context.cancel, context.budget);
  if (!file.ok()) return file.status();
  // The file's copies stay charged (file->hold) until the answer is made.
  json contents = {{"uri", file->uri}, {"mimeType", file->mime_type}};
  if (IsTextMimeType(file->mime_type) && codemode::IsValidUtf8(file->data)) {
    contents["text"] = std::move(file->data);
  } else {
    contents["blob"] = absl::Base64Escape(file->data);
  }
  return json{{"contents", json::array({std::move(contents)})}};
}

absl::StatusOr<json> RunResources::ListOwnedResources(const std::string& cursor, ToolCallContext& context) {
  return ListResult(service_->owned().List(context.credential, cursor, context.cancel));
}

std::shared_ptr<void> RunResources::WatchResources(const std::string& credential, std::function<void()> ready,
                                                   std::function<void()> changed) {
  return service_->watch().Subscribe(credential, std::move(ready), std::move(changed));
}

}  // namespace gateway
