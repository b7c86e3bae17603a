#include "client/lib/lmu_update_session.h"

#include "client/lib/batch_session_impl.h"

namespace streamlearn {

template class BatchSession<LmuUpdateTraits>;

}  // namespace streamlearn
