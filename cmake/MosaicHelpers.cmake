# mosaic_add_module(NAME SOURCES ... DEPS ...): one static library per module, named mosaic_<NAME>.
# Sources whose name ends in _test.cc become the module's test binary (mosaic_<NAME>_test).
#
# PRECOMPILE lists heavy headers (nlohmann/json, CLI11) to precompile for the library; test
# binaries with three or more sources precompile GoogleTest and GoogleMock.
# LABEL is the ctest label of the module's tests: "unit" unless given (the CUDA backend's tests
# say "gpu", so `ctest -L unit` stays runnable on a machine without one).
function(mosaic_add_module name)
  cmake_parse_arguments(ARG "" "LABEL" "SOURCES;DEPS;TEST_DEPS;PRECOMPILE" ${ARGN})
  if(NOT ARG_LABEL)
    set(ARG_LABEL unit)
  endif()
  set(lib_sources "")
  set(test_sources "")
  foreach(src IN LISTS ARG_SOURCES)
    if(src MATCHES "_test\\.cc$")
      list(APPEND test_sources ${src})
    else()
      list(APPEND lib_sources ${src})
    endif()
  endforeach()
  add_library(mosaic_${name} STATIC ${lib_sources})
  target_include_directories(mosaic_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(mosaic_${name} PUBLIC ${ARG_DEPS})
  set_target_properties(mosaic_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  if(ARG_PRECOMPILE AND NOT MOSAIC_FUZZ)
    target_precompile_headers(mosaic_${name} PRIVATE ${ARG_PRECOMPILE})
  endif()
  if(MOSAIC_BUILD_TESTS AND test_sources)
    add_executable(mosaic_${name}_test ${test_sources})
    # Test code itself needs no heavy optimisation (the code under test keeps its flags), and
    # GoogleTest/GoogleMock templates at -O2 dominate the build time.
    target_compile_options(mosaic_${name}_test PRIVATE $<$<CONFIG:Release,RelWithDebInfo>:-O1>)
    list(LENGTH test_sources test_count)
    if(test_count GREATER_EQUAL 3)
      target_precompile_headers(mosaic_${name}_test PRIVATE <gtest/gtest.h> <gmock/gmock.h> ${ARG_PRECOMPILE})
    endif()
    add_dependencies(mosaic_unit_tests mosaic_${name}_test)
    target_link_libraries(mosaic_${name}_test PRIVATE mosaic_${name} ${ARG_TEST_DEPS} GTest::gtest_main GTest::gmock)
    target_compile_definitions(mosaic_${name}_test PRIVATE MOSAIC_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
    gtest_discover_tests(mosaic_${name}_test DISCOVERY_TIMEOUT 60 PROPERTIES LABELS ${ARG_LABEL})
  endif()
endfunction()
