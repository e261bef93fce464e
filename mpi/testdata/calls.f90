! callsf: a Fortran MPI program (mpif.h, no gclock code) making the calls
! libgclockmpi traces from Fortran, for TestFortranTrace: a ring of sends
! (tag 11), nonblocking both ways (tags 12, 13; MPI_WAITALL, MPI_WAIT,
! MPI_TEST), MPI_SENDRECV (tag 14), the collectives (MPI_BCAST root 1,
! MPI_REDUCE root 2, MPI_GATHER root 3, MPI_SCATTER root 0, ...) and
! MPI_IN_PLACE. usage: callsf ROUNDS; prints "fok RANK" when every result
! was right.
program callsf
  implicit none
  include 'mpif.h'
  integer :: ierr, rank, nproc, r, rounds, nxt, prv, i
  integer :: v(3), got(3), s(3), all(16), one
  integer :: req(2), st(MPI_STATUS_SIZE), sts(MPI_STATUS_SIZE, 2)
  logical :: flag, ok
  character(len=32) :: arg
  call MPI_INIT(ierr)
  call MPI_COMM_RANK(MPI_COMM_WORLD, rank, ierr)
  call MPI_COMM_SIZE(MPI_COMM_WORLD, nproc, ierr)
  rounds = 2
  if (command_argument_count() >= 1) then
    call get_command_argument(1, arg)
    read (arg, *) rounds
  end if
  nxt = mod(rank + 1, nproc)
  prv = mod(rank + nproc - 1, nproc)
  ok = .true.
  do r = 1, rounds
    v = (/ rank, r, 7 /)
    if (rank == 0) then
      call MPI_SEND(v, 3, MPI_INTEGER, nxt, 11, MPI_COMM_WORLD, ierr)
      call MPI_RECV(got, 3, MPI_INTEGER, prv, 11, MPI_COMM_WORLD, st, ierr)
    else
      call MPI_RECV(got, 3, MPI_INTEGER, MPI_ANY_SOURCE, 11, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
      call MPI_SEND(v, 3, MPI_INTEGER, nxt, 11, MPI_COMM_WORLD, ierr)
    end if
    if (got(1) /= prv) ok = .false.
    call MPI_IRECV(got, 2, MPI_INTEGER, prv, 12, MPI_COMM_WORLD, req(1), ierr)
    call MPI_ISEND(v, 2, MPI_INTEGER, nxt, 12, MPI_COMM_WORLD, req(2), ierr)
    call MPI_WAITALL(2, req, sts, ierr)
    if (got(1) /= prv .or. sts(MPI_SOURCE, 1) /= prv .or. sts(MPI_TAG, 1) /= 12) ok = .false.
    call MPI_IRECV(got, 1, MPI_INTEGER, nxt, 13, MPI_COMM_WORLD, req(1), ierr)
    call MPI_SEND(v, 1, MPI_INTEGER, prv, 13, MPI_COMM_WORLD, ierr)
    flag = .false.
    do while (.not. flag)
      call MPI_TEST(req(1), flag, st, ierr)
    end do
    if (got(1) /= nxt .or. st(MPI_SOURCE) /= nxt) ok = .false.
    call MPI_ISEND(v, 1, MPI_INTEGER, nxt, 12, MPI_COMM_WORLD, req(2), ierr)
    call MPI_RECV(got, 1, MPI_INTEGER, prv, 12, MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
    call MPI_WAIT(req(2), MPI_STATUS_IGNORE, ierr)
    call MPI_SENDRECV(v, 3, MPI_INTEGER, nxt, 14, got, 3, MPI_INTEGER, prv, 14, MPI_COMM_WORLD, st, ierr)
    call MPI_BARRIER(MPI_COMM_WORLD, ierr)
    call MPI_BCAST(v, 3, MPI_INTEGER, 1, MPI_COMM_WORLD, ierr)
    if (v(1) /= 1) ok = .false.
    call MPI_REDUCE(v, s, 2, MPI_INTEGER, MPI_SUM, 2, MPI_COMM_WORLD, ierr)
    call MPI_ALLREDUCE(v, s, 3, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    v(1) = rank
    call MPI_SCAN(v, s, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    if (s(1) /= rank * (rank + 1) / 2) ok = .false.
    call MPI_EXSCAN(v, s, 1, MPI_INTEGER, MPI_SUM, MPI_COMM_WORLD, ierr)
    call MPI_GATHER(v, 1, MPI_INTEGER, all, 1, MPI_INTEGER, 3, MPI_COMM_WORLD, ierr)
    call MPI_SCATTER(all, 1, MPI_INTEGER, one, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
    call MPI_ALLGATHER(v, 1, MPI_INTEGER, all, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
    do i = 1, nproc
      if (all(i) /= i - 1) ok = .false.
    end do
    call MPI_ALLTOALL(all, 1, MPI_INTEGER, s, 1, MPI_INTEGER, MPI_COMM_WORLD, ierr)
    s(1) = rank
    call MPI_ALLREDUCE(MPI_IN_PLACE, s, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
    if (s(1) /= nproc - 1) ok = .false.
  end do
  if (ok) write (*, '(A,I0)') 'fok ', rank
  call MPI_FINALIZE(ierr)
end program callsf
