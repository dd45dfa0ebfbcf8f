# bench/pkgs.sh: sourced by the benches that compile against
# libtokbench.a: LIBS and CFL, pkg-config's flags for the Makefile's own
# package list (make print-pkgs), so a library the Makefile links is never
# missing here (bench_engine and bench_firehose once lacked zlib).
TB_PKGS=$(make -s --no-print-directory print-pkgs)
LIBS=$(pkg-config --libs $TB_PKGS)
CFL=$(pkg-config --cflags $TB_PKGS)
