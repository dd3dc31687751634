option(TOWERPS_THREAD_SAFETY "clang only: check the GUARDED_BY/REQUIRES annotations, as errors" OFF)

# towerps_target_defaults(<target>): warnings and include root shared by every TowerPS target.
function(towerps_target_defaults target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>
    # GCC 12 false positive on std::string concatenation (GCC bug 105329).
    $<$<CXX_COMPILER_ID:GNU>:$<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>>)
  if(TOWERPS_THREAD_SAFETY)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wthread-safety -Werror=thread-safety>)
  endif()
endfunction()
