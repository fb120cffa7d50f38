#!/usr/bin/python3
"""Copy a disk image as it is allocated: the source's data extents
(zeros included) as written blocks, its holes as holes, then fsync and
drop the copy from the page cache.

    copy-image.py SOURCE DEST

cp turns the zeros of a sparse image into holes, and QEMU's writes to
such a copy allocate blocks on the host where the original's writes
overwrote them (lab/README.md, "The guest machine").  The copy ends on disk and out of the page cache, as
the original is after the guest's O_DIRECT (cache=none) writes.
"""
import os
import sys


def copy_allocated(src, dst):
    fi = os.open(src, os.O_RDONLY)
    fo = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        size = os.fstat(fi).st_size
        os.ftruncate(fo, size)
        off = 0
        while off < size:
            try:
                data = os.lseek(fi, off, os.SEEK_DATA)
            except OSError:     # ENXIO: no data after off
                break
            hole = os.lseek(fi, data, os.SEEK_HOLE)
            pos = data
            while pos < hole:
                n = os.copy_file_range(fi, fo, hole - pos, pos, pos)
                if n == 0:
                    raise OSError(f"{src}: copy stopped at {pos} of {hole}")
                pos += n
            off = hole
        os.fsync(fo)
        os.posix_fadvise(fo, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fi)
        os.close(fo)


def main(argv):
    if len(argv) != 3:
        sys.exit("usage: copy-image.py SOURCE DEST")
    try:
        copy_allocated(argv[1], argv[2])
    except OSError as e:
        sys.exit(f"copy-image.py: {argv[1]} -> {argv[2]}: {e}")


if __name__ == "__main__":
    main(sys.argv)
