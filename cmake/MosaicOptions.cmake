# Build switches. Everything CPU builds and runs without CUDA; CUDA is found, not required.

set(MOSAIC_CUDA AUTO CACHE STRING "Build the CUDA backend: AUTO (when nvcc is found), ON, OFF")
set_property(CACHE MOSAIC_CUDA PROPERTY STRINGS AUTO ON OFF)
option(MOSAIC_BUILD_TESTS "Build unit and integration tests" ON)
option(MOSAIC_FUZZ "Build libFuzzer targets (needs clang)" OFF)
set(MOSAIC_SANITIZE "" CACHE STRING "Sanitizers, e.g. address,undefined")
# x86-64-v3 = AVX2 + FMA + F16C: every x86 server of the last decade; the CPU GEMM is written for it.
set(MOSAIC_CPU_ISA "x86-64-v3" CACHE STRING "-march value for CPU kernels (empty: compiler default)")

# ---- CUDA --------------------------------------------------------------------------
set(MOSAIC_HAVE_CUDA OFF)
if(NOT MOSAIC_CUDA STREQUAL "OFF" AND NOT MOSAIC_FUZZ)
  if(NOT DEFINED CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    # Shared cudart everywhere: one runtime per process, and the CUDA libraries of the machine
    # the binary runs on (cuBLASLt links dynamically too).
    set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(MOSAIC_HAVE_CUDA ON)
  elseif(MOSAIC_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MOSAIC_CUDA=ON but no CUDA compiler was found (set CMAKE_CUDA_COMPILER)")
  endif()
endif()
message(STATUS "Mosaic: CUDA backend ${MOSAIC_HAVE_CUDA}")

# One ISA for the whole program: inline functions compiled for AVX2 in one module may be the
# copy the linker keeps for every module, so mixing targets would not make the rest portable.
if(MOSAIC_CPU_ISA AND CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-march=${MOSAIC_CPU_ISA}>)
endif()

# ---- warnings, sanitizers ----------------------------------------------------------
add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-Wall> $<$<COMPILE_LANGUAGE:CXX>:-Wextra>
                    $<$<COMPILE_LANGUAGE:CXX>:-Wno-unused-parameter>
                    # designated initialisers name only the fields that differ from the defaults
                    $<$<COMPILE_LANGUAGE:CXX>:-Wno-missing-field-initializers>)
if(MOSAIC_SANITIZE)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fsanitize=${MOSAIC_SANITIZE}>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-omit-frame-pointer>
                      $<$<COMPILE_LANGUAGE:CXX>:-fno-sanitize-recover=all>)
  add_link_options(-fsanitize=${MOSAIC_SANITIZE})
endif()
if(MOSAIC_FUZZ)
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
