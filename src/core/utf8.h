// Well-formed UTF-8 (Unicode Table 3-7), the one check that the tokenizer and messages that
// quote user bytes (paths, JSON errors) share.
#pragma once

#include <cstddef>

namespace mosaic {

// Returns the length of the sequence at `p` when it is well formed (positive), or minus the
// length of its maximal ill-formed subpart (at least 1): the bytes that began a plausible
// sequence and must be replaced together. `available` (at least 1) bytes may be read.
int utf8_scan(const unsigned char* p, size_t available);

}  // namespace mosaic
