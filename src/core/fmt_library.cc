// {fmt}, compiled once. Debian ships fmt as headers plus a shared library only; the header-only
// mode recompiles fmt's implementation in every translation unit (~6 s each at -O2, most of
// the project's build time), and the shared library is absent where binaries are carried (the
// GPU machine). So the implementation header is compiled here, once, into mosaic_core, with the
// two character-type instantiations the rest of the program links against.
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {
template auto thousands_sep_impl<char>(locale_ref) -> thousands_sep_result<char>;
template auto decimal_point_impl<char>(locale_ref) -> char;
}  // namespace detail
FMT_END_NAMESPACE
