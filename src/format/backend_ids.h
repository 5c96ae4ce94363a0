// The backend ids etc writes into BackendDelegate.id: the compiler's lowering names the
// delegate, the runtime registers its backends under the same name.
#pragma once

namespace etc {

// etc's CUDA delegate: an execution plan of the IR with its constants (etc_delegate.fbs).
inline constexpr const char* kCudaBackendId = "EtcCudaBackend";

}  // namespace etc
