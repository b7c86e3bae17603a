#include "client/lib/ingest_session.h"

#include "client/lib/batch_session_impl.h"

namespace streamlearn {

template class BatchSession<SauIngestTraits>;

}  // namespace streamlearn
