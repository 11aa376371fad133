// See files.hpp.
#include "src/io/files.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "attn/error.hpp"

namespace attn::detail {

std::string read_whole_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(path + ": is a directory, not a file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path + ": cannot open: " + std::strerror(errno));
  // Appended in 64 KiB reads into a string reserved to the file's size: one allocation, where
  // a string stream held the file twice (its buffer, then the copy it returned).
  std::string contents;
  if (const uintmax_t size = std::filesystem::file_size(path, ec); !ec) contents.reserve(size);
  std::string chunk(size_t{1} << 16, '\0');
  while (in.read(chunk.data(), static_cast<std::streamsize>(chunk.size())) || in.gcount() > 0) {
    contents.append(chunk.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) throw Error(path + ": read failed");
  return contents;
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  const std::string temp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(temp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(path + ": cannot open for writing: " + std::strerror(errno));
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.close();
    if (!out) {
      std::remove(temp.c_str());
      throw Error(path + ": write failed");
    }
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    std::remove(temp.c_str());
    throw Error(path + ": cannot rename the written file into place: " + ec.message());
  }
}

}  // namespace attn::detail
