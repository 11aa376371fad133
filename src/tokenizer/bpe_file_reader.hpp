// Reads a tokenizer file's top-level fields as the JSON parser meets them, without building a
// document tree: the tree of a 4096-token file (a small array per merge, a node per value)
// took more memory than the tokenizer it describes. What it keeps is only what
// BpeTokenizer::from_json checks — each field's type and value, the strings of string arrays,
// the shape and ids of each merge — so every check and message stays the same. Internal.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "src/tokenizer/text.hpp"

namespace attn::detail {

enum class JsonType : uint8_t {
  kNull,
  kBool,
  kInteger,
  kUnsigned,
  kFloat,
  kString,
  kArray,
  kObject,
  kBinary
};

// A number as read: kInteger (value), kUnsigned (value, or too_large past INT64_MAX), or another
// type.
struct JsonNumber {
  JsonType type = JsonType::kNull;
  bool too_large = false;
  int64_t value = 0;
};

// One entry of "merges": whether it is an array, how many items it has (counting stops at 3),
// its first two as numbers. 24 bytes, as a file may hold millions of them.
struct JsonPair {
  int64_t values[2] = {0, 0};
  JsonType types[2] = {JsonType::kNull, JsonType::kNull};
  bool too_large[2] = {false, false};
  uint8_t size = 0;
  bool is_array = false;

  JsonNumber id(int i) const { return {types[i], too_large[i], values[i]}; }
  void add(const JsonNumber& n) {
    if (size < 2) {
      values[size] = n.value;
      types[size] = n.type;
      too_large[size] = n.too_large;
    }
    if (size < 3) ++size;
  }
};

// A top-level field.
struct JsonField {
  JsonType type = JsonType::kNull;
  bool boolean = false;
  JsonNumber number;                 // its type is the field's type, its value set for numbers
  std::string text;                  // type kString
  std::vector<std::string> strings;  // type kArray (not "merges"): its string items
  bool only_strings = true;          // type kArray: no item was anything else
  std::vector<JsonPair> pairs;       // "merges"
};

// The SAX handler (nlohmann::json::sax_parse calls these).
class BpeFileReader {
 public:
  using json = nlohmann::json;

  // Parses text; false (with error()) when it is not one well-formed JSON document.
  bool read(std::string_view text) { return json::sax_parse(text.begin(), text.end(), this); }
  const std::string& error() const { return error_; }
  // True when reading stopped at a top-level array of more than kMaxVocab items (error() says
  // which): a tokenizer cannot use more, and 20 million merges cost 1.8 GB before the check
  // that came after reading them all.
  bool over_limit() const { return over_limit_; }
  bool root_is_object() const { return root_is_object_; }
  // The field, or nullptr when the document has none by that name.
  const JsonField* field(const std::string& name) const {
    const auto it = fields_.find(name);
    return it == fields_.end() ? nullptr : &it->second;
  }

  bool null() { return value(JsonType::kNull); }
  bool boolean(bool b) {
    if (depth_ == 1 && current_ != nullptr) current_->boolean = b;
    return value(JsonType::kBool);
  }
  bool number_integer(json::number_integer_t v) { return number({JsonType::kInteger, false, v}); }
  bool number_unsigned(json::number_unsigned_t v) {
    const bool too_large = v > static_cast<uint64_t>(INT64_MAX);
    return number({JsonType::kUnsigned, too_large, too_large ? 0 : static_cast<int64_t>(v)});
  }
  bool number_float(json::number_float_t, const std::string&) { return number({JsonType::kFloat}); }
  bool string(std::string& s) {
    if (depth_ == 1 && current_ != nullptr) {
      current_->text = std::move(s);
    } else if (depth_ == 2 && current_ != nullptr && !in_merges_) {
      if (!within_limit(current_->strings.size() + 1)) return false;
      current_->strings.push_back(std::move(s));
      return true;
    }
    return value(JsonType::kString);
  }
  bool binary(json::binary_t&) { return value(JsonType::kBinary); }
  bool key(std::string& k) {
    if (depth_ == 1 && root_is_object_) {
      current_ = &fields_[k];
      *current_ = JsonField{};  // a repeated key: the last one counts
      in_merges_ = k == "merges";
    }
    return true;
  }
  bool start_object(size_t) { return open(JsonType::kObject); }
  bool end_object() { return close(); }
  bool start_array(size_t) { return open(JsonType::kArray); }
  bool end_array() { return close(); }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception& e) {
    error_ = e.what();
    return false;
  }

 private:
  // A scalar at the current depth.
  bool value(JsonType type) {
    if (depth_ == 1 && current_ != nullptr) current_->type = current_->number.type = type;
    if (depth_ == 2 && current_ != nullptr && !item(type)) return false;
    if (depth_ == 3 && current_ != nullptr && in_merges_ && !current_->pairs.empty()) {
      JsonPair& pair = current_->pairs.back();  // an id that is not a number
      pair.add({type, false, 0});
    }
    return true;
  }
  bool number(JsonNumber n) {
    if (depth_ == 1 && current_ != nullptr) current_->number = n;
    if (depth_ == 3 && current_ != nullptr && in_merges_ && !current_->pairs.empty()) {
      JsonPair& pair = current_->pairs.back();
      pair.add(n);
      return true;
    }
    return value(n.type);
  }
  // An item of a top-level array that is not a string (strings are kept by string()); false
  // stops the parse past the limit.
  bool item(JsonType type) {
    if (current_->type != JsonType::kArray) return true;
    if (in_merges_) {
      if (!within_limit(current_->pairs.size() + 1)) return false;  // before the vector grows
      JsonPair pair;
      pair.is_array = type == JsonType::kArray;
      current_->pairs.push_back(pair);
      return true;
    }
    current_->only_strings = false;
    return true;
  }
  bool within_limit(size_t items) {
    if (items <= static_cast<size_t>(kMaxVocab)) return true;
    over_limit_ = true;
    error_ = "a top-level array holds more than " + std::to_string(kMaxVocab) +
             " items, more than any vocabulary";
    return false;
  }
  bool open(JsonType type) {
    if (depth_ == 0) root_is_object_ = type == JsonType::kObject;
    if (depth_ == 1 && current_ != nullptr) current_->type = current_->number.type = type;
    if (depth_ == 2 && current_ != nullptr && !item(type)) return false;
    if (depth_ == 3 && current_ != nullptr && in_merges_ && !current_->pairs.empty()) {
      JsonPair& pair = current_->pairs.back();
      pair.add({type, false, 0});
    }
    ++depth_;
    return true;
  }
  bool close() {
    --depth_;
    return true;
  }

  std::map<std::string, JsonField> fields_;
  JsonField* current_ = nullptr;  // the top-level field being read
  bool in_merges_ = false;
  bool root_is_object_ = false;
  bool over_limit_ = false;
  size_t depth_ = 0;
  std::string error_;
};

}  // namespace attn::detail
