// Compile-time options of specs and pipelines, in one mechanism: an option is a type that
// names its kind (a tag) and carries a value, e.g. tp::delay_release<1> is an option of tag
// delay_release_tag with value 1. option_v<Tag, Default, Opts...> reads the first option of
// a tag from a list (anything else in the list is ignored), so every consumer states its
// options and their defaults in one line.
#pragma once

#include "config.cuh"

#include <type_traits>

namespace tilepipe {

/// A compile-time option: Tag says which, Value what.
template <class Tag, auto Value>
struct option {
  using tag = Tag;
  static constexpr auto value = Value;
};

namespace detail {
template <class T, class = void>
struct tag_of {
  using type = void;
};
template <class T>
struct tag_of<T, std::void_t<typename T::tag>> {
  using type = typename T::tag;
};
}  // namespace detail

/// Whether an option of tag Tag is among Opts.
template <class Tag, class... Opts>
inline constexpr bool has_option_v = (std::is_same_v<typename detail::tag_of<Opts>::type, Tag> || ...);

/// The value of the first option of tag Tag among Opts, or Default.
template <class Tag, auto Default, class... Opts>
inline constexpr auto option_v = [] {
  auto v = Default;
  bool found = false;
  (
      [&] {
        if constexpr (std::is_same_v<typename detail::tag_of<Opts>::type, Tag>)
          if (!found) v = Opts::value, found = true;
      }(),
      ...);
  return v;
}();

}  // namespace tilepipe
