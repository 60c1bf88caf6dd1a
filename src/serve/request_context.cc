#include "serve/request_context.h"

namespace mosaic::serve {
namespace {

thread_local RequestContext* current = nullptr;

}  // namespace

RequestContext* current_request() { return current; }

RequestScope::RequestScope(RequestContext& context) : previous_(current) { current = &context; }

RequestScope::~RequestScope() { current = previous_; }

}  // namespace mosaic::serve
