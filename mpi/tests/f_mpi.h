! SPDX-License-Identifier: BSD-3-Clause
!
! The MPI binding of a Fortran test program, as the build picks it
! (CUCOPY_F08: use mpi_f08; CUCOPY_MPIFH: mpif.h; neither: use mpi), then
! `implicit none`, and the handle types of that binding as macros (REQUEST,
! DATATYPE, COMM, OP, MESSAGE, FILE_H, WIN_H). #included by each program
! right after its other use statements (cpp, not Fortran include: it holds
! #if and #define).
#if defined(CUCOPY_F08)
  use mpi_f08
#elif !defined(CUCOPY_MPIFH)
  use mpi
#endif
  implicit none
#if defined(CUCOPY_MPIFH)
  include 'mpif.h'
#endif

#if defined(CUCOPY_F08)
#define REQUEST type(MPI_Request)
#define DATATYPE type(MPI_Datatype)
#define COMM type(MPI_Comm)
#define OP type(MPI_Op)
#define MESSAGE type(MPI_Message)
#define FILE_H type(MPI_File)
#define WIN_H type(MPI_Win)
#else
#define REQUEST integer
#define DATATYPE integer
#define COMM integer
#define OP integer
#define MESSAGE integer
#define FILE_H integer
#define WIN_H integer
#endif
