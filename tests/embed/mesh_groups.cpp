// The class of a mesh program (tests/codegen/mesh_grads.dg, mesh dp=2, tp=2) under
// MPI, constructed two ways: on MPI_COMM_WORLD, which it splits into its groups, and
// with the application's own group communicators (Groups), made as Megatron makes
// its process groups. Both must give the same numbers, bit for bit; a communicator
// of the wrong size stops the constructor (argv[1] == "wrong").
#include <mpi.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "mesh_grads.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const int dp = rank / 2, tp = rank % 2;  // row-major over (dp, tp)
  MPI_Comm dp_group, tp_group, world_copy;
  MPI_Comm_split(MPI_COMM_WORLD, tp, dp, &dp_group);  // the ranks with this tp index, by dp
  MPI_Comm_split(MPI_COMM_WORLD, dp, tp, &tp_group);  // the ranks with this dp index, by tp
  MPI_Comm_dup(MPI_COMM_WORLD, &world_copy);
  int same = 1;
  {
    if (argc > 1 && std::strcmp(argv[1], "wrong") == 0) {
      mesh_grads bad(MPI_COMM_WORLD, mesh_grads::Groups{.dp = world_copy, .tp = tp_group});
    }
    std::vector<float> loss[2], dw[2], dx[2];
    for (int k = 0; k < 2; ++k) {
      loss[k].resize(mesh_grads::loss_size);
      dw[k].resize(mesh_grads::dw_size);
      dx[k].resize(mesh_grads::dx_size);
    }
    mesh_grads split(MPI_COMM_WORLD);
    mesh_grads given(MPI_COMM_WORLD, mesh_grads::Groups{.dp = dp_group, .tp = tp_group});
    mesh_grads* steps[2] = {&split, &given};
    for (int k = 0; k < 2; ++k) {
      steps[k]->set_loss_out(loss[k].data());
      steps[k]->set_dw_out(dw[k].data());
      steps[k]->set_dx_out(dx[k].data());
      steps[k]->run();
    }
    same = loss[0] == loss[1] && dw[0] == dw[1] && dx[0] == dx[1];
    std::printf("rank %d: loss %g, the given groups' outputs %s the split ones'\n", rank, double(loss[1][0]),
                same ? "equal" : "DIFFER from");
  }
  MPI_Comm_free(&dp_group);
  MPI_Comm_free(&tp_group);
  MPI_Comm_free(&world_copy);
  MPI_Finalize();
  return same ? 0 : 1;
}
