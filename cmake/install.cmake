# cmake --install: the library, the public headers (and the generated version header), the CLI,
# an exported CMake package (find_package(attn 0.1) then attn::attn) and attn.pc for pkg-config.
include(CMakePackageConfigHelpers)

set(ATTN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/attn)
install(TARGETS attn EXPORT attnTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# attn::distributed (MPI), when it was built: find_package(attn COMPONENTS distributed) then
# attn::distributed; the package config then finds MPI for it.
if(TARGET attn_distributed)
  set_target_properties(attn_distributed PROPERTIES EXPORT_NAME distributed)
  install(TARGETS attn_distributed EXPORT attnTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
  set(ATTN_HAS_DISTRIBUTED ON)
  set(ATTN_HEADERS_LEFT_OUT "")
else()
  set(ATTN_HAS_DISTRIBUTED OFF)
  set(ATTN_HEADERS_LEFT_OUT "distributed.hpp")  # it includes mpi.h
endif()
install(DIRECTORY include/attn DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp" PATTERN "${ATTN_HEADERS_LEFT_OUT}" EXCLUDE)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/include/attn/version.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/attn)
if(TARGET attn_cli)
  install(TARGETS attn_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  # Bash completion: commands and options read from attn's own --help when completing.
  install(FILES tools/attn/share/attn.bash
          DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME attn)
  # The man page, made from the program's --help by help2man (scripts/bootstrap installs it).
  find_program(ATTN_HELP2MAN help2man)
  if(ATTN_HELP2MAN)
    add_custom_command(
      OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/attn.1
      COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/tools/attn/share/make_man_page.sh
              $<TARGET_FILE:attn_cli> ${CMAKE_CURRENT_BINARY_DIR}/attn.1
      DEPENDS attn_cli tools/attn/share/make_man_page.sh
      COMMENT "Writing the man page attn.1 from attn --help")
    add_custom_target(attn_man_page ALL DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/attn.1)
    install(FILES ${CMAKE_CURRENT_BINARY_DIR}/attn.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
  else()
    message(STATUS "help2man not found: no man page (scripts/bootstrap installs it)")
  endif()
endif()

install(EXPORT attnTargets NAMESPACE attn:: DESTINATION ${ATTN_CMAKE_DIR})
configure_package_config_file(cmake/attnConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/attnConfig.cmake
                              INSTALL_DESTINATION ${ATTN_CMAKE_DIR})
# 0.x: a minor version may break the API, so find_package(attn 0.1) accepts 0.1.* only.
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/attnConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/attnConfig.cmake
              ${CMAKE_CURRENT_BINARY_DIR}/attnConfigVersion.cmake
        DESTINATION ${ATTN_CMAKE_DIR})

# attn.pc finds its prefix from its own location, so `cmake --install --prefix P` may put the
# tree anywhere: the prefix is as many levels above pkgconfig/ as the library directory is deep.
string(REGEX MATCHALL "[^/]+" ATTN_LIBDIR_PARTS "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
set(ATTN_PC_PREFIX "\${pcfiledir}")
foreach(part IN LISTS ATTN_LIBDIR_PARTS)
  string(APPEND ATTN_PC_PREFIX "/..")
endforeach()
if(BUILD_SHARED_LIBS)
  set(ATTN_PC_LIBS "-L\${libdir} -lattn")
else()  # a static libattn.a: its own dependencies go on the consumer's link line
  set(ATTN_PC_LIBS "-L\${libdir} -lattn -lhwy_contrib -lhwy -lcairo -ldl -pthread")
endif()
configure_file(cmake/attn.pc.in ${CMAKE_CURRENT_BINARY_DIR}/attn.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/attn.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
