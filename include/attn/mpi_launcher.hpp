// Whether an MPI launcher started this process, from the variables it sets — without MPI
// itself, so that a program built without MPI can tell it was started by mpirun (and refuse)
// instead of running N copies that each think they are alone.
#pragma once

#include <cstdlib>
#include <initializer_list>

namespace attn::distributed {

inline bool started_by_mpi_launcher() {
  // Open MPI's mpirun, PMIx-based launchers (srun, prterun), and MPICH/Hydra's PMI.
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_SIZE"}) {
    if (std::getenv(name) != nullptr) return true;
  }
  return false;
}

}  // namespace attn::distributed
