# towerps_target_defaults(<target>): warnings and include root shared by every TowerPS target.
function(towerps_target_defaults target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>
    # GCC 12 false positive on std::string concatenation (GCC bug 105329).
    $<$<CXX_COMPILER_ID:GNU>:$<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>>)
endfunction()
