// sandboxd_bench's measurement 7: a 10 MiB file of random (incompressible) bytes into a
// session's /workspace and out again, through sandboxd (UploadFile in 1 MiB messages,
// DownloadFile), and the seeds' way, `podman cp`, into and out of the same session's
// container; also `podman exec` with cat, the other seed way, which works under gVisor
// too. Every repetition is checked, so a broken path cannot pass as a fast one: after each
// transfer in, code in the session reads the file and its size and CRC-32 must match;
// each transfer out must return the very bytes that went in.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "bench.h"
#include "stats.h"

namespace sandboxd_bench {
namespace {

using Stub = sb::SandboxService::Stub;

constexpr size_t kFileBytes = 10u << 20;
constexpr size_t kChunkBytes = 1u << 20;
constexpr double kTargetMiBps = 100;
// The session's /workspace holds the uploaded file, the temporary file the next upload
// writes beside it, and the seeds' two copies: 40 MiB, with room to spare.
constexpr uint64_t kWorkspaceBytes = 64ull << 20;
constexpr char kGvisorCpNote[] =
    "Under gVisor `podman cp` cannot reach the container's files at all (\"could not be "
    "found on container\", both ways): podman 4 copies inside the mount namespace of the "
    "container's pid, which for runsc is the runsc-sandbox process, whose root is a nearly "
    "empty directory (etc/localtime, proc); the container's files, /workspace's tmpfs "
    "included, live inside gVisor's Sentry. So the seeds' `podman cp` does not work in this "
    "column; `podman exec` with cat (the rows below it) does.";

// CRC-32 as Python's zlib.crc32 computes it.
uint32_t Crc32(const std::string& s) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xedb88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t c = 0xffffffffu;
  for (unsigned char b : s) c = table[(c ^ b) & 0xff] ^ (c >> 8);
  return c ^ 0xffffffffu;
}

std::string RandomBytes(size_t n) {
  std::mt19937_64 rng(std::random_device{}());
  std::string s(n, '\0');
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = rng();
    memcpy(&s[i], &v, std::min<size_t>(8, n - i));
  }
  return s;
}

double MiBps(double ms) { return static_cast<double>(kFileBytes) / (1 << 20) / (ms / 1000.0); }

// UploadFile of `data` in kChunkBytes messages, timed from opening the stream to Finish()
// (by then the runner has renamed the whole file into place).
grpc::Status Upload(Stub& stub, const std::string& sid, const std::string& path,
                    const std::string& data, sb::FileInfo* info, double* ms) {
  auto t0 = SteadyClock::now();
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(60000));
  std::unique_ptr<grpc::ClientWriter<sb::UploadFileRequest>> writer = stub.UploadFile(&ctx, info);
  sb::UploadFileRequest m;
  m.mutable_start()->set_session_id(sid);
  m.mutable_start()->set_path(path);
  writer->Write(m);  // a failure shows up in Finish()
  for (size_t off = 0; off < data.size(); off += kChunkBytes) {
    m.set_data(data.data() + off, std::min(kChunkBytes, data.size() - off));
    if (!writer->Write(m)) break;  // the server ended the call early
  }
  writer->WritesDone();
  grpc::Status st = writer->Finish();
  *ms = MsSince(t0);
  return st;
}

// DownloadFile into `data`, timed from the request to Finish().
grpc::Status Download(Stub& stub, const std::string& sid, const std::string& path,
                      std::string* data, double* ms) {
  auto t0 = SteadyClock::now();
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline(60000));
  sb::DownloadFileRequest req;
  req.set_session_id(sid);
  req.set_path(path);
  std::unique_ptr<grpc::ClientReader<sb::FileChunk>> reader = stub.DownloadFile(&ctx, req);
  sb::FileChunk chunk;
  data->clear();
  data->reserve(kFileBytes);
  while (reader->Read(&chunk)) data->append(chunk.data());
  grpc::Status st = reader->Finish();
  *ms = MsSince(t0);
  return st;
}

}  // namespace

void Bench::FileTransfer() {
  sb::Session s;
  if (!FileSession(&s)) return;
  file_data_ = RandomBytes(kFileBytes);
  file_container_ = s.container_id();
  std::string dir = absl::StrFormat("/tmp/sandboxd-bench-%d-files", getpid());
  mkdir(dir.c_str(), 0700);
  std::ofstream(dir + "/in.bin", std::ios::binary | std::ios::trunc) << file_data_;
  CpuMeter meter(d_->pid(), {s.container_id()});
  std::vector<Transfer> ts(2);
  ts[0].what = "UploadFile 10 MiB, random bytes in 1 MiB messages";
  ts[0].label = "UploadFile";
  TimeTransfer(
      &ts[0],
      [&](std::string* why) {
        sb::FileInfo info;
        double ms;
        grpc::Status st = Upload(*stub_, s.id(), "upload.bin", file_data_, &info, &ms);
        if (!st.ok()) *why = "UploadFile: " + StatusText(st);
        return st.ok() ? ms : NAN;
      },
      [&] { return SessionSees(s.id(), "upload.bin"); });
  ts[1].what = "DownloadFile 10 MiB (the uploaded file)";
  ts[1].label = "DownloadFile";
  ts[1].into = false;
  std::string got;
  if (ts[0].failure.empty()) {
    TimeTransfer(
        &ts[1],
        [&](std::string* why) {
          double ms;
          grpc::Status st = Download(*stub_, s.id(), "upload.bin", &got, &ms);
          if (!st.ok()) *why = "DownloadFile: " + StatusText(st);
          return st.ok() ? ms : NAN;
        },
        [&] {
          return got == file_data_ ? std::string()
                                   : absl::StrCat("DownloadFile returned ", got.size(),
                                                  " bytes that are not the uploaded ones");
        });
  } else {
    ts[1].failure = "not measured: the upload failed";
  }
  // Before the seeds: the conmon and runtime processes of their podman commands would
  // count as other work.
  Contention("UploadFile/DownloadFile", meter.Read());
  // The seeds' podman commands have no container to work on in the wasm column.
  if (ts[0].failure.empty() && !wasm_) FileSeeds(s, dir, &ts);
  if (grpc::Status st = Delete(*stub_, s.id()); !st.ok()) {
    r_->Error("DeleteSession: " + StatusText(st));
  }
  unlink((dir + "/in.bin").c_str());
  unlink((dir + "/out.bin").c_str());
  rmdir(dir.c_str());
  FileRows(ts);
}

// A session of its own with a /workspace of kWorkspaceBytes (not from the pool: its limits
// are not the defaults); false (after saying why) when the daemon cannot take the file.
bool Bench::FileSession(sb::Session* s) {
  sb::Info info;
  if (grpc::Status st = GetInfo(*stub_, &info); !st.ok()) {
    r_->Error("GetInfo: " + StatusText(st));
    return false;
  }
  if (info.max_file_bytes() < kFileBytes || info.max_limits().workspace_bytes() < kWorkspaceBytes) {
    r_->Error(absl::StrCat("file transfers: the daemon's max_file_bytes (", info.max_file_bytes(),
                           ") or largest workspace (", info.max_limits().workspace_bytes(),
                           ") is too small for a 10 MiB file"));
    return false;
  }
  sb::CreateSessionRequest req;
  req.mutable_limits()->set_workspace_bytes(kWorkspaceBytes);
  if (grpc::Status st = Create(*stub_, req, s); !st.ok()) {
    r_->Error("CreateSession (files): " + StatusText(st));
    return false;
  }
  return true;
}

// o_.file_reps repetitions of `move` (wall ms, or NAN with why), each followed by `check`
// (untimed: empty, or what is wrong with the bytes); stops at the first failure.
void Bench::TimeTransfer(Transfer* t, const std::function<double(std::string*)>& move,
                         const std::function<std::string()>& check) {
  Progress("7. " + t->label);
  for (int i = 0; i < o_.file_reps; ++i) {
    std::string why;
    // Not for the seeds: their podman commands start conmon and runtime processes that
    // are neither ours nor the container's.
    std::unique_ptr<CpuMeter> meter;
    if (!t->seed) meter = std::make_unique<CpuMeter>(d_->pid(), std::vector{file_container_});
    double ms = move(&why);
    if (meter && !std::isnan(ms)) {
      CpuMeter::Use u = meter->Read();  // % of one core over secs: x 10 is ms
      t->daemon_cpu_ms += u.daemon_pct * u.secs * 10;
      t->runner_cpu_ms += u.containers_pct * u.secs * 10;  // NAN: its cgroup was not found
      t->client_cpu_ms += u.self_pct * u.secs * 10;
    }
    if (std::isnan(ms)) {
      t->failure = why;
      return;
    }
    if (std::string wrong = check(); !wrong.empty()) {
      t->failure = wrong;
      t->wrong_bytes = true;
      return;
    }
    t->ms.push_back(ms);
  }
}

// Empty when the session's code reads file_data_ at `path` (under /workspace), else what
// it read.
std::string Bench::SessionSees(const std::string& sid, const std::string& path) {
  std::string code = absl::StrCat(
      "import os, zlib\n"
      "_p = '", path, "'\n"
      "(os.path.getsize(_p), zlib.crc32(open(_p, 'rb').read())) if os.path.exists(_p) "
      "else 'absent'\n");
  sb::Finished f;
  grpc::Status st = RunUnary(*stub_, sid, code, &f);
  if (!st.ok()) return "checking the file in the session: Run: " + StatusText(st);
  if (f.status() != sb::Finished::OK) {
    return absl::StrCat("checking the file in the session: ", sb::Finished::Status_Name(f.status()),
                        " ", f.error().type(), ": ", f.error().message().substr(0, 200));
  }
  std::string want = absl::StrCat("(", file_data_.size(), ", ", Crc32(file_data_), ")");
  if (f.result_repr() == want) return "";
  return absl::StrCat("the transfer succeeded, but the session's code reads ", f.result_repr(),
                      " at /workspace/", path, " instead of ", want, " (size, CRC-32)");
}

// The seeds' ways on the same session container: `podman cp` in and out, and `podman
// exec` with cat (stdin from the file, stdout into a file), each timed as a whole command.
void Bench::FileSeeds(const sb::Session& s, const std::string& dir, std::vector<Transfer>* out) {
  const std::string in = dir + "/in.bin", back = dir + "/out.bin", cid = s.container_id();
  auto session_sees = [&](const std::string& path) {
    return [this, path, &s] { return SessionSees(s.id(), path); };
  };
  auto host_copy_matches = [&] {
    std::string copy = ReadFileText(back);
    unlink(back.c_str());
    return copy == file_data_ ? std::string()
                              : absl::StrCat("the copy out has ", copy.size(),
                                             " bytes that are not the uploaded ones");
  };
  struct Seed {
    std::string what, label;
    bool into;
    std::vector<std::string> argv;
    std::string stdin_file, stdout_file;
    std::function<std::string()> check;
  };
  const std::vector<Seed> seeds = {
      {"`podman cp FILE <session container>:/workspace/cp-in.bin`", "podman cp in", true,
       {"podman", "cp", in, cid + ":/workspace/cp-in.bin"}, "", "", session_sees("cp-in.bin")},
      {"`podman cp <session container>:/workspace/upload.bin FILE`", "podman cp out", false,
       {"podman", "cp", cid + ":/workspace/upload.bin", back}, "", "", host_copy_matches},
      {"`podman exec -i <session container> sh -c 'cat > /workspace/exec-in.bin' < FILE`",
       "podman exec cat in", true,
       {"podman", "exec", "-i", cid, "sh", "-c", "cat > /workspace/exec-in.bin"}, in, "",
       session_sees("exec-in.bin")},
      {"`podman exec <session container> cat /workspace/upload.bin > FILE`",
       "podman exec cat out", false,
       {"podman", "exec", cid, "cat", "/workspace/upload.bin"}, "", back, host_copy_matches},
  };
  for (const Seed& seed : seeds) {
    Transfer t;
    t.what = "Seed: " + seed.what;
    t.label = seed.label;
    t.seed = true;
    t.into = seed.into;
    auto run = [&](std::string* why) {
      return TimeCommand(seed.argv, 120, why, seed.stdin_file, seed.stdout_file);
    };
    TimeTransfer(&t, run, seed.check);
    out->push_back(std::move(t));
  }
}

void Bench::FileRows(const std::vector<Transfer>& ts) {
  // p50 MiB/s of UploadFile and DownloadFile, for the seeds' ratios.
  double sandboxd_p50[2] = {NAN, NAN};
  std::vector<std::string> per_rep, cpu;
  for (const Transfer& t : ts) {
    std::vector<double> rates;
    for (double ms : t.ms) rates.push_back(MiBps(ms));
    double p50 = Pct(rates, 50);
    std::string what = absl::StrCat(t.what, " — p50 (min) of ", o_.file_reps);
    std::string cell = rates.empty() ? "fails (see notes)"
                                     : absl::StrFormat("%.0f MiB/s (min %.0f)", p50, Pct(rates, 0));
    if (!rates.empty() && static_cast<int>(rates.size()) < o_.file_reps) {
      absl::StrAppend(&cell, absl::StrFormat(", only %d", rates.size()));
    }
    if (!t.seed) {
      sandboxd_p50[t.into ? 0 : 1] = p50;
      r_->TargetAtLeast("7", what, p50, kTargetMiBps, cell, "≥ 100 MiB/s");
    } else {
      double vs = sandboxd_p50[t.into ? 0 : 1];
      if (!std::isnan(p50) && !std::isnan(vs)) {
        absl::StrAppend(&cell, absl::StrFormat(" — %s is %.1fx %s",
                                               t.into ? "UploadFile" : "DownloadFile",
                                               vs >= p50 ? vs / p50 : p50 / vs,
                                               vs >= p50 ? "faster" : "slower"));
      }
      r_->Info("7", what, cell);
    }
    if (!t.seed && !t.ms.empty()) {
      double n = static_cast<double>(t.ms.size());
      cpu.push_back(absl::StrFormat("%s sandboxd %.0f ms, runner %.0f ms, client %.0f ms",
                                    t.label, t.daemon_cpu_ms / n, t.runner_cpu_ms / n,
                                    t.client_cpu_ms / n));
    }
    if (!t.ms.empty()) {
      per_rep.push_back(absl::StrCat(t.label, " ",
                                     absl::StrJoin(t.ms, ", ", [](std::string* o, double v) {
                                       absl::StrAppend(o, absl::StrFormat("%.0f", v));
                                     })));
    }
    FileFailure(t);
  }
  r_->Note(absl::StrCat(
      "File transfers (10 MiB of random bytes, ", o_.file_reps, " times each way, on a session "
      "of their own with a 64 MiB /workspace): UploadFile is timed from opening the stream to "
      "Finish() (the file renamed into place), DownloadFile from the request to Finish(); the "
      "seeds' commands as whole processes, the file on the host in /tmp. After every transfer "
      "in, the session's code read the file back (size and CRC-32); every transfer out returned "
      "the uploaded bytes. Wall ms per repetition: ",
      absl::StrJoin(per_rep, "; "), "."));
  if (!cpu.empty()) {
    r_->Note(absl::StrCat("CPU per 10 MiB transfer, mean over the timed part (/proc ticks of "
                          "10 ms, the container's cgroup): ", absl::StrJoin(cpu, "; "), "."));
  }
}

// What went wrong with one way of moving the file: an error for sandboxd's own rpcs and for
// seeds that fail unexpectedly; a note for what the seeds' commands cannot do.
void Bench::FileFailure(const Transfer& t) {
  if (t.failure.empty()) {
    if (t.seed && t.into && t.what.find("podman cp") != std::string::npos) {
      r_->Note("`podman cp` into the running session container wrote onto the session's "
               "/workspace tmpfs (podman copies inside the container's mount namespace), not "
               "onto the overlay beneath it: the session's code read the same bytes after "
               "every copy.");
    }
    return;
  }
  if (!t.seed) {
    r_->Error(t.what + ": " + t.failure);
  } else if (gvisor_ && t.what.find("podman cp") != std::string::npos &&
             t.failure.find("could not be found on container") != std::string::npos) {
    if (t.into) r_->Note(kGvisorCpNote);
    r_->Note(absl::StrCat(t.what, " fails: ", t.failure));
  } else if (t.wrong_bytes) {
    r_->Note(absl::StrCat("**", t.what, ": ", t.failure, "**"));
  } else {
    r_->Error(t.what + ": " + t.failure);
  }
}

}  // namespace sandboxd_bench
