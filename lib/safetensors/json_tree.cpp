// JsonTree: nlohmann's DOM built through its SAX parser into a tree this object owns, so that
// the tree is taken apart here, not in nlohmann's allocating destructor.
#include "safetensors/json_tree.hpp"

namespace pthload::safetensors {
namespace {

using nlohmann::json;

// Leaves first: clearing a container whose children are scalars or empty containers allocates
// nothing (nlohmann reserves a vector of size 0 for each). Recursion depth is the document's
// nesting, which the caller bounded.
void dismantle(json& value) noexcept {
  if (value.is_array()) {
    auto& children = value.get_ref<json::array_t&>();
    for (json& child : children)
      dismantle(child);
    children.clear();
  } else if (value.is_object()) {
    auto& members = value.get_ref<json::object_t&>();
    for (auto& member : members)
      dismantle(member.second);
    members.clear();
  }
}

}  // namespace

bool nesting_within(std::string_view text, int max_depth) noexcept {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return true;
}

JsonTree::JsonTree(std::string_view text) {
  try {
    nlohmann::detail::json_sax_dom_parser<json> builder(root_, true);
    (void)json::sax_parse(text.begin(), text.end(), &builder);
  } catch (...) {
    // The destructor does not run for a constructor that throws; root_'s would allocate.
    dismantle(root_);
    throw;
  }
}

JsonTree::~JsonTree() {
  dismantle(root_);
}

}  // namespace pthload::safetensors
