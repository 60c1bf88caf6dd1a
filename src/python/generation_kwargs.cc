// Keyword arguments -> mosaic::GenerationOptions, with a clear message for each wrong argument.
#include "python/generation_kwargs.h"

#include <fmt/format.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <functional>
#include <optional>

#include "python/bindings.h"

namespace mosaic::python {
namespace {

std::string type_name(const py::handle& value) { return Py_TYPE(value.ptr())->tp_name; }

[[noreturn]] void wrong_type(const std::string& name, const char* expected, const py::handle& value) {
  throw py::type_error(fmt::format("{} must be {}, got {} {}", name, expected, type_name(value),
                                   py::repr(value).cast<std::string>()));
}

bool is_bool(const py::handle& value) {
  return PyBool_Check(value.ptr()) || type_name(value) == std::string("numpy.bool_");
}

// Python ints and NumPy integers; not bools (True is an int to Python, but never meant as 1 here).
int64_t as_int(const std::string& name, const py::handle& value) {
  if (is_bool(value) || !PyIndex_Check(value.ptr())) wrong_type(name, "an int", value);
  const py::int_ number = py::reinterpret_steal<py::int_>(PyNumber_Index(value.ptr()));
  int overflow = 0;
  const long long result = PyLong_AsLongLongAndOverflow(number.ptr(), &overflow);
  if (overflow != 0)
    throw py::value_error(fmt::format("{} = {} is out of range", name, py::repr(value).cast<std::string>()));
  return result;
}

// A count given explicitly (None means "the default"), so 0 or less is a mistake, not a default.
int64_t as_token_count(const std::string& name, const py::handle& value) {
  const int64_t count = as_int(name, value);
  if (count < 1) throw py::value_error(fmt::format("{} must be at least 1 (None: the default), got {}", name, count));
  return count;
}

// A token id given explicitly (None: the model's or tokenizer's).
int64_t as_token_id(const std::string& name, const py::handle& value) {
  const int64_t id = as_int(name, value);
  if (id < 0) throw py::value_error(fmt::format("{} must be a token id >= 0 (None: the default), got {}", name, id));
  return id;
}

uint64_t as_seed(const std::string& name, const py::handle& value) {
  if (is_bool(value) || !PyIndex_Check(value.ptr())) wrong_type(name, "an int", value);
  const py::int_ number = py::reinterpret_steal<py::int_>(PyNumber_Index(value.ptr()));
  const unsigned long long result = PyLong_AsUnsignedLongLong(number.ptr());
  if (PyErr_Occurred()) {
    PyErr_Clear();
    throw py::value_error(fmt::format("{} must be an int in [0, 2**64), got {}", name,
                                      py::repr(value).cast<std::string>()));
  }
  return result;
}

// ints and floats (Python or NumPy), not bools or strings.
double as_float(const std::string& name, const py::handle& value) {
  const bool number = PyFloat_Check(value.ptr()) || PyLong_Check(value.ptr()) ||
                      PyIndex_Check(value.ptr()) || type_name(value).rfind("numpy.float", 0) == 0;
  if (is_bool(value) || !number) wrong_type(name, "a number", value);
  return py::float_(py::reinterpret_borrow<py::object>(value)).cast<double>();
}

// None unsets an optional option.
std::optional<double> as_optional_float(const std::string& name, const py::handle& value) {
  return value.is_none() ? std::nullopt : std::optional(as_float(name, value));
}

std::optional<int64_t> as_optional_int(const std::string& name, const py::handle& value) {
  return value.is_none() ? std::nullopt : std::optional(as_int(name, value));
}

bool as_bool(const std::string& name, const py::handle& value) {
  if (!is_bool(value)) wrong_type(name, "True or False", value);
  return PyObject_IsTrue(value.ptr()) == 1;
}

template <typename Enum>
Enum as_choice(const std::string& name, const py::handle& value,
               std::initializer_list<std::pair<const char*, Enum>> choices) {
  if (!PyUnicode_Check(value.ptr())) wrong_type(name, "a string", value);
  const std::string text = value.cast<std::string>();
  std::string names;
  for (const auto& [choice, result] : choices) {
    if (text == choice) return result;
    names += fmt::format("{}'{}'", names.empty() ? "" : ", ", choice);
  }
  throw py::value_error(fmt::format("{} must be one of {}, got '{}'", name, names, text));
}

TokenEditing& editing_of(GenerationOptions& o) {
  if (!o.editing) o.editing = TokenEditing{};
  return *o.editing;
}

D2fOptions& d2f_of(GenerationOptions& o) {
  if (!o.d2f) o.d2f = D2fOptions{};
  return *o.d2f;
}

using Setter = std::function<void(GenerationOptions&, const std::string&, const py::handle&)>;

// One entry per GenerationOptions field, in its order.
const std::vector<std::pair<std::string, Setter>>& setters() {
  static const std::vector<std::pair<std::string, Setter>> table = {
      {"gen_length", [](auto& o, auto& n, auto& v) { o.gen_length = as_int(n, v); }},
      {"steps", [](auto& o, auto& n, auto& v) { o.steps = as_int(n, v); }},
      {"block_length", [](auto& o, auto& n, auto& v) { o.block_length = v.is_none() ? 0 : as_token_count(n, v); }},
      {"temperature", [](auto& o, auto& n, auto& v) { o.temperature = as_float(n, v); }},
      {"seed", [](auto& o, auto& n, auto& v) { o.seed = as_seed(n, v); }},
      {"cfg_scale", [](auto& o, auto& n, auto& v) { o.cfg_scale = as_float(n, v); }},
      {"remasking", [](auto& o, auto& n, auto& v) {
         o.remasking = as_choice<Remasking>(n, v, {{"low_confidence", Remasking::low_confidence},
                                                   {"random", Remasking::random}});
       }},
      {"logits_eos_inf", [](auto& o, auto& n, auto& v) { o.logits_eos_inf = as_bool(n, v); }},
      {"confidence_eos_eot_inf", [](auto& o, auto& n, auto& v) { o.confidence_eos_eot_inf = as_bool(n, v); }},
      {"alg", [](auto& o, auto& n, auto& v) {
         o.alg = as_choice<DreamAlg>(n, v, {{"origin", DreamAlg::origin},
                                            {"maskgit_plus", DreamAlg::maskgit_plus},
                                            {"topk_margin", DreamAlg::topk_margin},
                                            {"entropy", DreamAlg::entropy}});
       }},
      {"alg_temp", [](auto& o, auto& n, auto& v) { o.alg_temp = as_optional_float(n, v); }},
      {"top_p", [](auto& o, auto& n, auto& v) { o.top_p = as_optional_float(n, v); }},
      {"top_k", [](auto& o, auto& n, auto& v) { o.top_k = as_optional_int(n, v); }},
      {"eps", [](auto& o, auto& n, auto& v) { o.eps = as_float(n, v); }},
      {"threshold", [](auto& o, auto& n, auto& v) { o.threshold = as_optional_float(n, v); }},
      {"factor", [](auto& o, auto& n, auto& v) { o.factor = as_optional_float(n, v); }},
      {"cache", [](auto& o, auto& n, auto& v) {
         o.cache = as_choice<CacheMode>(n, v, {{"auto", CacheMode::automatic}, {"none", CacheMode::none},
                                               {"prefix", CacheMode::prefix}, {"dual", CacheMode::dual}});
       }},
      // D2F (docs/design/d2f-decoding.md): d2f=True decodes by it; its thresholds need it.
      {"d2f", [](auto& o, auto& n, auto& v) { if (as_bool(n, v) && !o.d2f) o.d2f = D2fOptions{}; }},
      {"block_add_threshold", [](auto& o, auto& n, auto& v) { d2f_of(o).block_add_threshold = as_float(n, v); }},
      {"decoded_token_threshold", [](auto& o, auto& n, auto& v) { d2f_of(o).decoded_token_threshold = as_float(n, v); }},
      {"skip_threshold", [](auto& o, auto& n, auto& v) { d2f_of(o).skip_threshold = as_float(n, v); }},
      // LLaDA 2.1's token editing: any of its options turns it on.
      {"editing_threshold", [](auto& o, auto& n, auto& v) { editing_of(o).editing_threshold = as_float(n, v); }},
      {"max_post_steps", [](auto& o, auto& n, auto& v) { editing_of(o).max_post_steps = as_int(n, v); }},
      {"num_to_transfer", [](auto& o, auto& n, auto& v) { editing_of(o).num_to_transfer = as_int(n, v); }},
      {"stop_at_eos", [](auto& o, auto& n, auto& v) { o.stop_at_eos = as_bool(n, v); }},
      {"eos_id", [](auto& o, auto& n, auto& v) { o.eos_id = v.is_none() ? -1 : as_token_id(n, v); }},
      {"eot_id", [](auto& o, auto& n, auto& v) { o.eot_id = v.is_none() ? -1 : as_token_id(n, v); }},
  };
  return table;
}

}  // namespace

const std::vector<std::string>& sampling_option_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> result;
    for (const auto& [name, setter] : setters()) result.push_back(name);
    return result;
  }();
  return names;
}

GenerationOptions generation_options_from_kwargs(const py::dict& kwargs) {
  GenerationOptions options;
  for (const auto& [key, value] : kwargs) {
    const std::string name = py::str(key).cast<std::string>();
    bool known = false;
    for (const auto& [option, setter] : setters()) {
      if (option != name) continue;
      setter(options, name, value);
      known = true;
      break;
    }
    if (!known)
      throw py::type_error(fmt::format("unexpected keyword argument '{}'; the sampling options are: {}",
                                       name, fmt::join(sampling_option_names(), ", ")));
  }
  // D2F's options take effect with d2f=True only; its steps are the loop's cap, as in `mosaic generate`.
  const bool d2f = kwargs.contains("d2f") && py::cast<bool>(kwargs["d2f"]);
  for (const char* name : {"block_add_threshold", "decoded_token_threshold", "skip_threshold"})
    if (kwargs.contains(name) && !d2f) throw py::value_error(fmt::format("{} is an option of D2F decoding: pass d2f=True", name));
  if (!d2f) options.d2f.reset();
  else if (kwargs.contains("steps")) options.d2f->max_steps = options.steps;
  // One step per position at most: the default of 128 shrinks with a shorter generation (a steps
  // given beyond gen_length is refused by name), as in `mosaic generate`.
  if (!kwargs.contains("steps")) options.steps = std::min(options.steps, options.gen_length);
  return options;
}

void bind_generation_kwargs(py::module_& m) {
  m.attr("SAMPLING_OPTIONS") = py::tuple(py::cast(sampling_option_names()));
  m.def(
      "check_sampling", [](const py::dict& kwargs) { generation_options_from_kwargs(kwargs); },
      py::arg("sampling"), "Raises TypeError / ValueError for a misspelt option, a wrong type or choice");
}

}  // namespace mosaic::python
