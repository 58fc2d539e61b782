/* The text form of a trace (common/TRACE.md, "The library"): what the trace
 * library keeps in git, so a changed answer reads as a changed line in a
 * diff. It converts to the binary form and back byte for byte. */
#pragma once

/* ftvmctl trace text FILE: the binary trace FILE as text, on stdout. Returns
 * ftvmctl's exit code. */
int trace_text_run(const char *path);

/* ftvmctl trace binary TEXT OUT: OUT (which must not exist) from TEXT. An
 * error names TEXT's line and what is wrong, and leaves no OUT behind. */
int trace_binary_run(const char *text_path, const char *out_path);
