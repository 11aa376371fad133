# cmake --install: the library, the public headers (and the generated version header), the CLI,
# an exported CMake package (find_package(attn 0.1) then attn::attn) and attn.pc for pkg-config.
include(CMakePackageConfigHelpers)

set(ATTN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/attn)
install(TARGETS attn EXPORT attnTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/attn DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp")
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/include/attn/version.hpp
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/attn)
if(TARGET attn_cli)
  install(TARGETS attn_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
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
  set(ATTN_PC_LIBS "-L\${libdir} -lattn -lhwy_contrib -lhwy -ldl -pthread")
endif()
configure_file(cmake/attn.pc.in ${CMAKE_CURRENT_BINARY_DIR}/attn.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/attn.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
