// --only, --exclude, --select, --rename-prefix: the same words as LoadOptions, for `ls` and `load`.
#include "choose.hpp"

#include <utility>

namespace pthinspect {

void add_choose_options(CLI::App& cmd, ChooseArgs& args) {
  cmd.add_option("--only", args.only,
                 "load only tensors whose name matches GLOB (* ? [a-z]; repeatable; after "
                 "--select and --rename-prefix)")
      ->type_name("GLOB")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd.add_option("--exclude", args.exclude,
                 "leave out tensors whose name matches GLOB (repeatable)")
      ->type_name("GLOB")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd.add_option("--select", args.select,
                 "only the sub-tree named PREFIX (state_dict, model, ema), names without it")
      ->type_name("PREFIX");
  cmd.add_option("--rename-prefix", args.rename_prefix,
                 "rename names starting with FROM to start with TO (e.g. module.=; repeatable, "
                 "the first that matches wins)")
      ->type_name("FROM=TO")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->check([](const std::string& pair) {
        return pair.find('=') == std::string::npos
                   ? "'" + pair + "' is not FROM=TO (e.g. module.= drops 'module.')"
                   : std::string();
      });
}

void apply_choose_options(const ChooseArgs& args, pthload::LoadOptions& options) {
  pthload::TensorFilter& filter = options.filter;
  filter.only = args.only;
  filter.exclude = args.exclude;
  filter.select = args.select;
  for (const auto& pair : args.rename_prefix) {
    const auto equals = pair.find('=');  // checked when parsed
    filter.rename_prefix.emplace_back(pair.substr(0, equals), pair.substr(equals + 1));
  }
}

}  // namespace pthinspect
