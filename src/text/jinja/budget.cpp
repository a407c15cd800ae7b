#include "text/jinja/budget.h"

#include "text/jinja/error.h"

namespace epq::text::jinja {
namespace {

thread_local WorkBudget* installed = nullptr;

}  // namespace

WorkBudget::WorkBudget(uint64_t units) : left_(units), statements_(units / kStatement), outer_(installed) { installed = this; }

WorkBudget::~WorkBudget() { installed = outer_; }

void WorkBudget::charge(uint64_t units) {
  WorkBudget* budget = installed;
  if (budget == nullptr) return;
  if (units > budget->left_) {
    budget->left_ = 0;
    failure("template ran too long: the work of over {} statements", budget->statements_);
  }
  budget->left_ -= units;
}

}  // namespace epq::text::jinja
