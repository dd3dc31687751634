option(TOWERPS_THREAD_SAFETY "clang only: check the GUARDED_BY/REQUIRES annotations, as errors" OFF)

# towerps_target_defaults(<target>): warnings and include root shared by every TowerPS target.
function(towerps_target_defaults target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>
    # GCC 12 false positives: std::string concatenation (GCC bug 105329), and designated
    # initializers that leave members to their default member initializers (their point).
    $<$<CXX_COMPILER_ID:GNU>:$<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict -Wno-missing-field-initializers>>)
  if(TOWERPS_THREAD_SAFETY)
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wthread-safety -Werror=thread-safety>)
  endif()
endfunction()
