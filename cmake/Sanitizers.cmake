# ASan + UBSan for the whole build; every UB report is fatal so tests fail on it.
if(RESHARD_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=all
                      -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
