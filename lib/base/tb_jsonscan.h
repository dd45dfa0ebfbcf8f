/*
 * tb_jsonscan: what a JSON text would cost before it is parsed.
 *
 * jansson builds a tree many times the size of its text: an empty object
 * is 3 bytes of text ("{},") and about 250 bytes of tree, so 12 MiB of them
 * became a gigabyte of the api (issue 34, item 1).  A reader of outside JSON
 * asks tb_jsonscan_cost first and refuses a text whose tree passes its
 * budget, naming the cap, before a byte of tree is made.  The cost is an
 * upper estimate in bytes, from jansson 2.14's allocations counted on this
 * machine (a counting allocator through json_set_alloc_funcs): an object
 * 250, an array 155, a number 50, a string 106 + its bytes, a literal 10, a
 * member 90-130 more than its key and value.  Each is rounded up here.
 *
 * tb_jsonscan_value_end finds where one JSON value ends, so a reader can
 * parse a top-level array one element at a time.
 *
 * Both scan the bytes only (strings and their escapes respected); neither
 * validates: the parser that follows does.
 */
#ifndef TB_JSONSCAN_H
#define TB_JSONSCAN_H

#include <stddef.h>

/* Estimated bytes of the tree jansson would build from s[0 .. n). */
size_t tb_jsonscan_cost(const char *s, size_t n);

/* The offset just past the JSON value that starts at s[0] (after no
 * whitespace): a balanced object or array, a string, or a scalar; n when the
 * text ends first (the parser then says what is wrong). */
size_t tb_jsonscan_value_end(const char *s, size_t n);

#endif
