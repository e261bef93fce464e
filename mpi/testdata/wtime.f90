! wtime: a Fortran MPI program (mpif.h, no gclock code) that prints
! MPI_WTIME and MPI_WTICK on every rank, read under libgclockmpi.
! usage: wtime N   prints "fwtime RANK WTIME" N times, then "ftick RANK WTICK"
program wtime
  implicit none
  include 'mpif.h'
  integer :: ierr, rank, i, n
  character(len=32) :: arg
  double precision :: w
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  n = 3
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) n
  end if
  do i = 1, n
    w = MPI_WTIME()
    write (*, '(A,I0,A,F0.9)') 'fwtime ', rank, ' ', w
  end do
  write (*, '(A,I0,A,ES12.5)') 'ftick ', rank, ' ', MPI_WTICK()
  call MPI_FINALIZE(ierr)
end program wtime
