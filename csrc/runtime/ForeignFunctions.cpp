#include "ForeignFunctions.h"

#include <deque>
#include <mutex>
#include <stdexcept>

namespace tpu::runtime {

namespace {

std::mutex mu;
std::deque<ForeignFunction>& table() {
  static std::deque<ForeignFunction> t;  // deque: references survive growth
  return t;
}

// Every symbol the text defines must be private and must not be @main: the text is pasted into a module
// whose @main is ours, and a public or clashing symbol would make the module invalid (or call the wrong
// function). Symbols are defined as `sym_name = "..."` in generic form.
void checkSymbols(const ForeignFunction& f) {
  bool entry = false;
  size_t defs = 0;
  for (size_t pos = f.text.find("sym_name = \""); pos != std::string::npos;
       pos = f.text.find("sym_name = \"", pos + 1)) {
    size_t start = pos + 12, end = f.text.find('"', start);
    if (end == std::string::npos) break;
    std::string sym = f.text.substr(start, end - start);
    ++defs;
    if (sym == "main") throw std::invalid_argument(f.name + ": a foreign function may not be called @main");
    entry |= sym == f.symbol;
  }
  if (!entry)
    throw std::invalid_argument(f.name + ": the foreign module text does not define @" + f.symbol);
  if (f.text.find("sym_visibility = \"public\"") != std::string::npos)
    throw std::invalid_argument(f.name + ": foreign functions must be private to the program");
  (void)defs;
}

}  // namespace

int64_t registerForeignFunction(ForeignFunction f) {
  if (f.symbol.empty()) throw std::invalid_argument(f.name + ": empty entry symbol");
  checkSymbols(f);
  std::lock_guard<std::mutex> lock(mu);
  table().push_back(std::move(f));
  return static_cast<int64_t>(table().size()) - 1;
}

const ForeignFunction& foreignFunction(int64_t id) {
  std::lock_guard<std::mutex> lock(mu);
  if (id < 0 || static_cast<size_t>(id) >= table().size())
    throw std::out_of_range("torch_tpu: no foreign function with id " + std::to_string(id));
  return table()[static_cast<size_t>(id)];
}

size_t foreignFunctionCount() {
  std::lock_guard<std::mutex> lock(mu);
  return table().size();
}

}  // namespace tpu::runtime
