// tc_amp_policy_doc: prints docs/amp-policy.md, generated from tc::amp::policy_table().
//   ./build/tools/tc_amp_policy_doc > docs/amp-policy.md
#include <iostream>

#include "tensorcast/amp/policy.h"

int main() {
  std::cout << tc::amp::policy_table_markdown();
  return 0;
}
