#include "trt_profile_bindings.h"

#include <pybind11/stl.h>

#include <string>
#include <vector>

#include "errors.h"
#include "spec/trt_profiles.h"

namespace aitune::python {
namespace py = pybind11;

namespace {

// Python forms: a recorded input is (name, semantic_repr, min, max, static_flags); a profile is
// a list of (min, opt, max) per recorded input; a user profile is a list of (name, min, opt, max).
std::vector<RecordedInput> recorded_from_python(const py::list& items) {
  std::vector<RecordedInput> out;
  for (auto item : items) {
    auto t = item.cast<py::tuple>();
    out.push_back({t[0].cast<std::string>(), t[1].cast<std::string>(), t[2].cast<Shape>(), t[3].cast<Shape>(),
                   t[4].cast<std::vector<bool>>()});
  }
  return out;
}

py::list profile_to_python(const OptimizationProfile& profile) {
  py::list out;
  for (const ProfileRange& r : profile.inputs) out.append(py::make_tuple(r.min, r.opt, r.max));
  return out;
}

py::list profiles_to_python(const std::vector<OptimizationProfile>& profiles) {
  py::list out;
  for (const auto& p : profiles) out.append(profile_to_python(p));
  return out;
}

std::vector<OptimizationProfile> profiles_from_python(const py::list& items) {
  std::vector<OptimizationProfile> out;
  for (auto profile : items) {
    OptimizationProfile p;
    for (auto range : profile) {
      auto t = range.cast<py::tuple>();
      p.inputs.push_back({t[0].cast<Shape>(), t[1].cast<Shape>(), t[2].cast<Shape>()});
    }
    out.push_back(std::move(p));
  }
  return out;
}

// (path_repr, [int | (name, is_batch, min, max, opt)]), as module.cc's dynamic-shape bindings take.
std::vector<InputShapeDef> defs_from_python(const py::list& items) {
  std::vector<InputShapeDef> out;
  for (auto item : items) {
    auto t = item.cast<py::tuple>();
    InputShapeDef def;
    def.path_repr = t[0].cast<std::string>();
    for (auto axis : t[1]) {
      if (py::isinstance<py::int_>(axis)) {
        def.axes.emplace_back(axis.cast<int64_t>());
        continue;
      }
      auto d = axis.cast<py::tuple>();
      def.axes.emplace_back(
          DimDef{d[0].cast<std::string>(), d[1].cast<bool>(), d[2].cast<int64_t>(), d[3].cast<int64_t>(),
                 d[4].is_none() ? std::nullopt : std::optional<int64_t>(d[4].cast<int64_t>())});
    }
    out.push_back(std::move(def));
  }
  return out;
}

// Profiles fixed at build time, selected per call.
class ProfileSelector {
 public:
  ProfileSelector(std::vector<std::string> names, const py::list& profiles)
      : names_(std::move(names)), profiles_(profiles_from_python(profiles)) {}

  size_t select(const std::vector<Shape>& shapes) const {
    return value_or_throw(select_profile(names_, profiles_, shapes));
  }
  size_t size() const { return profiles_.size(); }
  py::list profiles() const { return profiles_to_python(profiles_); }
  std::vector<std::pair<Shape, Shape>> envelope() const { return profile_envelope(profiles_); }

 private:
  std::vector<std::string> names_;
  std::vector<OptimizationProfile> profiles_;
};

}  // namespace

void register_trt_profile_bindings(py::module_& m) {
  m.def("trt_single_profile", [](const py::list& recorded) {
    py::list out;
    out.append(profile_to_python(single_profile(recorded_from_python(recorded))));
    return out;
  });
  m.def("trt_samples_used_profiles", [](const py::list& recorded,
                                        const std::vector<std::vector<Shape>>& samples) {
    return profiles_to_python(value_or_throw(samples_used_profiles(recorded_from_python(recorded), samples)));
  });
  m.def("trt_dynamic_shapes_profile", [](const py::list& recorded, const py::list& defs) {
    py::list out;
    out.append(
        profile_to_python(dynamic_shapes_profile(recorded_from_python(recorded), defs_from_python(defs))));
    return out;
  });
  m.def("trt_validate_profiles", [](const py::list& recorded, const py::list& user_profiles) {
    std::vector<UserProfile> users;
    for (auto profile : user_profiles) {
      UserProfile u;
      for (auto entry : profile) {
        auto t = entry.cast<py::tuple>();
        u.push_back({t[0].cast<std::string>(), {t[1].cast<Shape>(), t[2].cast<Shape>(), t[3].cast<Shape>()}});
      }
      users.push_back(std::move(u));
    }
    return profiles_to_python(value_or_throw(validate_user_profiles(recorded_from_python(recorded), users)));
  });
  m.def("trt_profile_envelope",
        [](const py::list& profiles) { return profile_envelope(profiles_from_python(profiles)); });
  py::class_<ProfileSelector>(m, "TrtProfileSelector")
      .def(py::init<std::vector<std::string>, const py::list&>(), py::arg("names"), py::arg("profiles"))
      .def("select", &ProfileSelector::select, py::arg("shapes"),
           "Index of the first profile containing every shape; ProfileShapeError otherwise.")
      .def("envelope", &ProfileSelector::envelope)
      .def_property_readonly("profiles", &ProfileSelector::profiles)
      .def("__len__", &ProfileSelector::size);
}

}  // namespace aitune::python
