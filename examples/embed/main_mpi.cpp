// Embeds layer.dg on the CPU under MPI: one rank per process (mpirun -np 2 embed),
// the class constructed on MPI_COMM_WORLD, the data in the application's own arrays.
#include <mpi.h>

#include "check.h"
#include "layer.h"

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int ok = 0;
  {
    float x[layer::x_size], w[layer::w_size], y[layer::y_size], s[layer::s_size], dw[layer::dw_size];
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j) x[3 * i + j] = embed::x_of(rank, i, j);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 2; ++j) w[2 * i + j] = embed::w_of(i, j);
    layer step(MPI_COMM_WORLD);  // stops with a message unless size == layer::world
    step.set_x(x);
    step.set_w(w);
    step.set_y_out(y);
    step.set_s_out(s);
    step.set_dw_out(dw);
    step.run();
    ok = embed::check(rank, size, y, s, dw);
  }  // the class is destroyed before MPI_Finalize
  int all_ok = 0;
  MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
