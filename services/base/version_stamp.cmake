# Writes base/version.cc for base/version.h (cmake -P, at every build: the
# codemode_version_stamp target). The revision is the source tree's now, with "-dirty"
# when tracked files differ from it ("unknown" without git), so a binary built after a
# commit or an edit says which source it is. configure_file rewrites the file only when its
# text changes: a build whose revision did not move compiles and links nothing for it.
#
# In: SOURCE_DIR, GIT_EXECUTABLE (may be empty), INPUT, OUTPUT, PROJECT_VERSION,
# CODEMODE_BUILD_TYPE.
set(CODEMODE_GIT_REVISION unknown)
if(GIT_EXECUTABLE)
  execute_process(COMMAND "${GIT_EXECUTABLE}" rev-parse --short HEAD
                  WORKING_DIRECTORY "${SOURCE_DIR}"
                  OUTPUT_VARIABLE revision OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE result ERROR_QUIET)
  if(result EQUAL 0 AND revision)
    set(CODEMODE_GIT_REVISION "${revision}")
    execute_process(COMMAND "${GIT_EXECUTABLE}" --no-optional-locks status --porcelain --untracked-files=no
                    WORKING_DIRECTORY "${SOURCE_DIR}"
                    OUTPUT_VARIABLE changes RESULT_VARIABLE result ERROR_QUIET)
    if(result EQUAL 0 AND changes)
      string(APPEND CODEMODE_GIT_REVISION "-dirty")
    endif()
  endif()
endif()
configure_file("${INPUT}" "${OUTPUT}" @ONLY)
