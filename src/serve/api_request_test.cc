// Request bodies: every field read with its type checked, OpenAI names mapped, and each bad
// input a 400 that names the field.
#include "serve/api_request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "serve/api_error.h"

namespace mosaic::serve {
namespace {

using ::testing::HasSubstr;

RequestLimits limits() {
  RequestLimits l;
  l.default_gen_length = 32;
  l.max_gen_length = 1024;
  l.max_steps = 4096;
  l.vocab = 500;
  return l;
}

ApiRequest parse(Endpoint endpoint, const std::string& body) { return parse_api_request(endpoint, body, limits()); }

// The 400's message and param for a body.
std::pair<std::string, std::string> refusal(Endpoint endpoint, const std::string& body) {
  try {
    parse(endpoint, body);
  } catch (const ApiError& error) {
    EXPECT_EQ(error.status, 400);
    EXPECT_EQ(error.type, "invalid_request_error");
    return {error.what(), error.param};
  }
  ADD_FAILURE() << "accepted: " << body;
  return {};
}

TEST(ApiRequest, CompletionWithOpenAiAndDllmFields) {
  const ApiRequest r = parse(Endpoint::completions,
                             R"({"model": "m", "prompt": "Hi", "max_tokens": 64, "temperature": 0.5, "seed": 7,
                                 "stream": true, "steps": 32, "block_length": 16, "remasking": "random",
                                 "cfg_scale": 1, "top_p": 1.0, "n": 1, "stop": null, "user": "x", "extra": [1]})");
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.text, "Hi");
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.options.gen_length, 64);
  EXPECT_EQ(r.options.steps, 32);
  EXPECT_EQ(r.options.block_length, 16);
  EXPECT_EQ(r.options.temperature, 0.5);
  EXPECT_EQ(r.options.seed, 7u);
  EXPECT_EQ(r.options.remasking, Remasking::random);
  EXPECT_EQ(r.options.cfg_scale, 1.0);
  EXPECT_FALSE(r.options.top_p.has_value());  // 1 filters nothing
}

TEST(ApiRequest, DefaultsAndDreamFields) {
  const ApiRequest d = parse(Endpoint::completions, R"({"prompt": [1, 2, 3]})");
  EXPECT_EQ(d.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_FALSE(d.text.has_value());
  EXPECT_EQ(d.options.gen_length, 32);
  EXPECT_EQ(d.options.steps, 32);  // one token per step by default
  EXPECT_FALSE(d.stream);
  const ApiRequest r = parse(Endpoint::completions,
                             R"({"prompt": [[4, 5]], "alg": "entropy", "alg_temp": 0.1, "top_k": 5, "top_p": 0.9,
                                 "eps": 0.01, "threshold": 0.9, "stop_at_eos": true})");
  EXPECT_EQ(r.prompt_ids, (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(r.options.alg, DreamAlg::entropy);
  EXPECT_EQ(r.options.alg_temp, 0.1);
  EXPECT_EQ(r.options.top_k, 5);
  EXPECT_EQ(r.options.top_p, 0.9);
  EXPECT_EQ(r.options.eps, 0.01);
  EXPECT_EQ(r.options.threshold, 0.9);
  EXPECT_TRUE(r.options.stop_at_eos);
}

TEST(ApiRequest, ChatMessagesAndGenerate) {
  const ApiRequest c = parse(Endpoint::chat_completions,
                             R"({"messages": [{"role": "system", "content": "Be brief."},
                                              {"role": "user", "content": [{"type": "text", "text": "Hi "},
                                                                           {"type": "text", "text": "there"}]}]})");
  ASSERT_EQ(c.messages.size(), 2u);
  EXPECT_EQ(c.messages[1].role, "user");
  EXPECT_EQ(c.messages[1].content, "Hi there");
  const ApiRequest g = parse(Endpoint::generate, R"({"prompt": "x", "gen_length": 8, "steps": 4, "chat": true})");
  EXPECT_TRUE(g.chat);
  EXPECT_EQ(g.options.gen_length, 8);
  EXPECT_EQ(g.options.steps, 4);
}

TEST(ApiRequest, MalformedBodies) {
  EXPECT_THAT(refusal(Endpoint::completions, "{\"prompt\": ").first, HasSubstr("not valid JSON"));
  EXPECT_THAT(refusal(Endpoint::completions, "").first, HasSubstr("not valid JSON"));
  EXPECT_THAT(refusal(Endpoint::completions, "[1, 2]").first, HasSubstr("must be a JSON object, got an array"));
  EXPECT_THAT(refusal(Endpoint::completions, "{}").first, HasSubstr("'prompt' is required"));
  EXPECT_THAT(refusal(Endpoint::chat_completions, R"({"prompt": "x"})").first, HasSubstr("'messages' is required"));
}

TEST(ApiRequest, WrongTypesNameTheField) {
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {R"({"prompt": "x", "max_tokens": "12"})", "max_tokens", "'max_tokens' must be an integer, got a string"},
      {R"({"prompt": "x", "max_tokens": 1.5})", "max_tokens", "'max_tokens' must be an integer, got a number"},
      {R"({"prompt": "x", "temperature": "hot"})", "temperature", "'temperature' must be a number, got a string"},
      {R"({"prompt": "x", "stream": 1})", "stream", "'stream' must be true or false, got an integer"},
      {R"({"prompt": "x", "model": 3})", "model", "'model' must be a string, got an integer"},
      {R"({"prompt": 5})", "prompt", "'prompt' must be a string or an array of token ids, got an integer"},
      {R"({"prompt": [1, "a"]})", "prompt", "found a string in the array"},
      {R"({"prompt": "x", "remasking": "sometimes"})", "remasking", "must be low_confidence or random"},
      {R"({"prompt": "x", "alg": 1})", "alg", "'alg' must be a string"},
  };
  for (const auto& [body, param, message] : cases) {
    const auto [what, field] = refusal(Endpoint::completions, body);
    EXPECT_EQ(field, param) << body;
    EXPECT_THAT(what, HasSubstr(message)) << body;
  }
  EXPECT_EQ(refusal(Endpoint::chat_completions, R"({"messages": "hi"})").second, "messages");
  EXPECT_EQ(refusal(Endpoint::chat_completions, R"({"messages": [{"content": "hi"}]})").second, "messages[0].role");
  EXPECT_EQ(refusal(Endpoint::chat_completions, R"({"messages": [{"role": "user", "content": 3}]})").second,
            "messages[0].content");
}

TEST(ApiRequest, OutOfRangeValues) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"prompt": "x", "max_tokens": 0})", "max_tokens"},
      {R"({"prompt": "x", "max_tokens": 100000})", "max_tokens"},
      {R"({"prompt": "x", "gen_length": 16, "max_tokens": 32})", "max_tokens"},
      {R"({"prompt": "x", "steps": 0})", "steps"},
      {R"({"prompt": "x", "steps": 99999999})", "steps"},
      {R"({"prompt": "x", "temperature": -1})", "temperature"},
      {R"({"prompt": "x", "top_p": 0})", "top_p"},
      {R"({"prompt": "x", "top_p": 1.5})", "top_p"},
      {R"({"prompt": "x", "top_k": 0})", "top_k"},
      {R"({"prompt": "x", "threshold": 2})", "threshold"},
      {R"({"prompt": "x", "seed": -1})", "seed"},
      {R"({"prompt": "x", "seed": 18446744073709551615})", "seed"},
      {R"({"prompt": [1, 500]})", "prompt"},
      {R"({"prompt": [-1]})", "prompt"},
      {R"({"prompt": ""})", "prompt"},
      {R"({"prompt": []})", "prompt"},
      {R"({"prompt": ["a", "b"]})", "prompt"},
      {R"({"prompt": "x", "n": 2})", "n"},
      {R"({"prompt": "x", "stop": ["\n"]})", "stop"},
      {R"({"prompt": "x", "logprobs": 5})", "logprobs"},
      {R"({"prompt": "x", "echo": true})", "echo"},
      {R"({"prompt": "x", "presence_penalty": 0.5})", "presence_penalty"},
  };
  for (const auto& [body, param] : cases) EXPECT_EQ(refusal(Endpoint::completions, body).second, param) << body;
  EXPECT_THAT(refusal(Endpoint::completions, R"({"prompt": "x", "max_tokens": 0})").first,
              HasSubstr("'max_tokens' must be between 1 and 1024, got 0"));
  EXPECT_THAT(refusal(Endpoint::completions, R"({"prompt": [1, 500]})").first,
              HasSubstr("token id 500 in 'prompt' is outside the vocabulary [0, 500)"));
}

}  // namespace
}  // namespace mosaic::serve
