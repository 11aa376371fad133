// See include/attn/files.hpp.
#include "attn/files.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "attn/error.hpp"

namespace attn {

std::string byte_count_text(uint64_t bytes) {
  std::string text = std::to_string(bytes) + " bytes";
  constexpr uint64_t kMiB = uint64_t{1} << 20, kGiB = uint64_t{1} << 30;
  if (bytes != 0 && bytes % kGiB == 0) return text + " (" + std::to_string(bytes / kGiB) + " GiB)";
  if (bytes != 0 && bytes % kMiB == 0) return text + " (" + std::to_string(bytes / kMiB) + " MiB)";
  return text;
}

namespace {

// Opens path for reading without blocking: a FIFO that no process writes to would block open()
// forever; opened non-blocking it reads as empty instead. Devices (/dev/zero, a terminal) are
// refused: they cannot be sized, and some never end.
std::FILE* open_for_reading(const std::string& path, struct stat& info) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw Error::about_file(path, std::string("cannot open: ") + std::strerror(errno));
  if (::fstat(fd, &info) != 0) {
    const int error = errno;
    ::close(fd);
    throw Error::about_file(path, std::string("cannot open: ") + std::strerror(error));
  }
  const char* kind = S_ISDIR(info.st_mode)    ? "is a directory, not a file"
                     : S_ISCHR(info.st_mode)  ? "is a character device, not a file"
                     : S_ISBLK(info.st_mode)  ? "is a block device, not a file"
                     : S_ISSOCK(info.st_mode) ? "is a socket, not a file"
                                              : nullptr;
  if (kind != nullptr) {
    ::close(fd);
    throw Error::about_file(path, kind);
  }
  // Reads block again from here: a FIFO with a writer waits for its data.
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  std::FILE* file = ::fdopen(fd, "rb");
  if (file == nullptr) {
    const int error = errno;
    ::close(fd);
    throw Error::about_file(path, std::string("cannot open: ") + std::strerror(error));
  }
  return file;
}

}  // namespace

InputFile::InputFile(const std::string& path) : file_(nullptr, &std::fclose) {
  struct stat info {};
  file_.reset(open_for_reading(path, info));
  if (S_ISREG(info.st_mode)) size_ = static_cast<uint64_t>(info.st_size);
}

std::string read_bytes(std::FILE* file, uint64_t n, const std::string& name) {
  std::string bytes;
  char chunk[1 << 14];
  while (bytes.size() < n) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(sizeof chunk, n - bytes.size()));
    const size_t got = std::fread(chunk, 1, want, file);
    bytes.append(chunk, got);
    if (got < want) break;
  }
  if (std::ferror(file))
    throw Error::about_file(name, std::string("read failed: ") + std::strerror(errno));
  return bytes;
}

void read_chunks(std::FILE* file, const std::string& name,
                 const std::function<void(std::string_view)>& consume) {
  char chunk[1 << 14];
  size_t got = 0;
  while ((got = std::fread(chunk, 1, sizeof chunk, file)) > 0)
    consume(std::string_view(chunk, got));
  if (std::ferror(file))
    throw Error::about_file(name, std::string("read failed: ") + std::strerror(errno));
}

std::string read_whole_file(const std::string& path, uint64_t max_bytes) {
  const InputFile input(path);
  if (input.size() && *input.size() > max_bytes) {
    throw Error::about_file(path, std::to_string(*input.size()) + " bytes, more than the " +
                                      byte_count_text(max_bytes) + " this file may have");
  }
  std::string contents;
  if (input.size()) contents.reserve(*input.size());
  read_chunks(input.get(), path, [&](std::string_view chunk) {
    contents.append(chunk);
    if (contents.size() > max_bytes) {
      throw Error::about_file(
          path, "longer than the " + byte_count_text(max_bytes) + " this file may have");
    }
  });
  return contents;
}

namespace {

std::string temporary_of(const std::string& path) {
  return path + ".tmp-" + std::to_string(::getpid());
}

// Writes bytes to path's temporary; attn::Error (and no temporary left) when it cannot.
void write_temporary(const std::string& path, const std::string& bytes) {
  const std::string temp = temporary_of(path);
  std::ofstream out(temp, std::ios::binary | std::ios::trunc);
  if (!out)
    throw Error::about_file(path, std::string("cannot open for writing: ") + std::strerror(errno));
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::remove(temp.c_str());
    throw Error::about_file(path, "write failed");
  }
}

void rename_into_place(const std::string& path) {
  const std::string temp = temporary_of(path);
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    std::remove(temp.c_str());
    throw Error::about_file(path, "cannot rename the written file into place: " + ec.message());
  }
}

}  // namespace

void write_file_atomically(const std::string& path, const std::string& bytes) {
  write_temporary(path, bytes);
  rename_into_place(path);
}

int remove_stale_temporaries(const std::string& dir) {
  std::error_code ec;
  int removed = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const size_t at = name.rfind(".tmp-");
    if (at == std::string::npos || at + 5 == name.size()) continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + at + 5, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    // kill(pid, 0) probes a process without signalling it: ESRCH = no such process.
    if (pid != ::getpid() && ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH &&
        std::filesystem::remove(entry.path(), ec)) {
      ++removed;
    }
  }
  return removed;
}

void write_files_atomically(const std::vector<std::pair<std::string, std::string>>& files) {
  // A directory in a file's place is the one thing that fails the rename but not the write:
  // refused before anything is written.
  for (const auto& file : files) {
    std::error_code ec;
    if (std::filesystem::is_directory(file.first, ec)) {
      throw Error::about_file(file.first, "is a directory; give a file name");
    }
  }
  for (size_t i = 0; i < files.size(); ++i) {
    try {
      write_temporary(files[i].first, files[i].second);
    } catch (...) {
      for (size_t j = 0; j < i; ++j) std::remove(temporary_of(files[j].first).c_str());
      throw;
    }
  }
  for (const auto& file : files) rename_into_place(file.first);
}

}  // namespace attn
