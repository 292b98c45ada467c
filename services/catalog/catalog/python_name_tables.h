// Code point classes of Python's str (python_name_tables.cc and python_nfkc_table.cc,
// written by scripts/python_name_tables.py): sorted, disjoint, inclusive ranges.
#pragma once

#include <cstddef>
#include <cstdint>

namespace codemode::python_tables {

struct CodePointRange {
  uint32_t lo;
  uint32_t hi;
};

extern const CodePointRange kPythonIdentifierStart[];
extern const size_t kPythonIdentifierStartSize;
extern const CodePointRange kPythonIdentifierContinue[];
extern const size_t kPythonIdentifierContinueSize;
extern const CodePointRange kPythonWord[];
extern const size_t kPythonWordSize;
extern const CodePointRange kPythonDigit[];
extern const size_t kPythonDigitSize;
extern const CodePointRange kNfkcUnstable[];
extern const size_t kNfkcUnstableSize;

}  // namespace codemode::python_tables
