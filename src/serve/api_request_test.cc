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
  // Left out: derived from the prompt's length once it is encoded (generation_plan.h).
  EXPECT_EQ(d.options.gen_length, 0);
  EXPECT_EQ(d.gen_length_field, "");
  EXPECT_EQ(d.options.steps, 0);
  EXPECT_FALSE(d.seed_given);
  EXPECT_EQ(d.n, 1);
  EXPECT_FALSE(d.logprobs.has_value());
  EXPECT_FALSE(d.parse_special);
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
      {R"({"prompt": "x", "gen_length": 16, "max_tokens": 32})", "gen_length"},
      {R"({"prompt": "x", "max_completion_tokens": 16, "max_tokens": 32})", "max_completion_tokens"},
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
      {R"({"prompt": "x", "n": 17})", "n"},
      {R"({"prompt": "x", "n": 0})", "n"},
      {R"({"prompt": "x", "stop": ""})", "stop"},
      {R"({"prompt": "x", "stop": ["a", "b", "c", "d", "e"]})", "stop"},
      {R"({"prompt": "x", "stop": [1]})", "stop"},
      {R"({"prompt": "x", "logprobs": 5})", "logprobs"},
      {R"({"prompt": "x", "logprobs": 1, "echo": true})", "echo"},
      {R"({"prompt": "x", "logprobs": 1, "stream": true})", "logprobs"},
      {R"({"prompt": "x", "presence_penalty": 0.5})", "presence_penalty"},
  };
  for (const auto& [body, param] : cases) EXPECT_EQ(refusal(Endpoint::completions, body).second, param) << body;
  EXPECT_THAT(refusal(Endpoint::completions, R"({"prompt": "x", "max_tokens": 0})").first,
              HasSubstr("'max_tokens' must be between 1 and 1024, got 0"));
  EXPECT_THAT(refusal(Endpoint::completions, R"({"prompt": [1, 500]})").first,
              HasSubstr("token id 500 in 'prompt' is outside the vocabulary [0, 500)"));
}

TEST(ApiRequest, OpenAiAnswerFields) {
  const ApiRequest c = parse(Endpoint::completions,
                             R"({"prompt": "x", "max_completion_tokens": 12, "n": 3, "stop": ["\n", "END"], "seed": 0,
                                 "logprobs": 2, "suffix": "tail", "parse_special": true, "best_of": 3})");
  EXPECT_EQ(c.options.gen_length, 12);
  EXPECT_EQ(c.gen_length_field, "max_completion_tokens");
  EXPECT_EQ(c.n, 3);
  EXPECT_EQ(c.stop, (std::vector<std::string>{"\n", "END"}));
  EXPECT_TRUE(c.seed_given);
  EXPECT_EQ(c.logprobs, 2);
  EXPECT_TRUE(c.options.logprobs);
  EXPECT_EQ(c.suffix, "tail");
  EXPECT_TRUE(c.parse_special);
  EXPECT_EQ(parse(Endpoint::completions, R"({"prompt": "x", "stop": "\n\n", "echo": true})").stop,
            (std::vector<std::string>{"\n\n"}));
  EXPECT_TRUE(parse(Endpoint::completions, R"({"prompt": "x", "echo": true})").echo);
  const ApiRequest s = parse(Endpoint::completions, R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": true}})");
  EXPECT_TRUE(s.include_usage);
  const ApiRequest chat = parse(Endpoint::chat_completions,
                                R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 1})");
  EXPECT_EQ(chat.logprobs, 1);
  EXPECT_FALSE(parse(Endpoint::chat_completions, R"({"messages": [{"role": "user", "content": "x"}], "logprobs": false})")
                   .logprobs.has_value());
}

TEST(ApiRequest, FeaturesThatWouldChangeTheAnswerAreRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"prompt": "x", "logit_bias": {"50256": -100}})", "logit_bias"},
      {R"({"prompt": "x", "response_format": {"type": "json_object"}})", "response_format"},
      {R"({"prompt": "x", "tools": [{"type": "function", "function": {"name": "f"}}]})", "tools"},
      {R"({"prompt": "x", "tool_choice": "auto"})", "tool_choice"},
      {R"({"prompt": "x", "functions": [{"name": "f"}]})", "functions"},
      {R"({"prompt": "x", "function_call": "auto"})", "function_call"},
      {R"({"prompt": "x", "best_of": 2})", "best_of"},
      {R"({"prompt": "x", "frequency_penalty": 1})", "frequency_penalty"},
      {R"({"prompt": "x", "modalities": ["text", "audio"]})", "modalities"},
      {R"({"prompt": "x", "stream_options": {"include_usage": true}})", "stream_options"},
      {R"({"prompt": "x", "stream": true, "stream_options": {"include_usage": 1}})", "stream_options.include_usage"},
  };
  for (const auto& [body, param] : cases) EXPECT_EQ(refusal(Endpoint::completions, body).second, param) << body;
  // Empty values ask for nothing.
  EXPECT_NO_THROW(parse(Endpoint::completions, R"({"prompt": "x", "logit_bias": {}, "tools": [], "tool_choice": "none",
                                                   "response_format": {"type": "text"}, "best_of": 1})"));
  const std::vector<std::pair<std::string, std::string>> chat = {
      {R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 1})", "top_logprobs"},
      {R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 3})", "top_logprobs"},
  };
  for (const auto& [body, param] : chat) EXPECT_EQ(refusal(Endpoint::chat_completions, body).second, param) << body;
  EXPECT_THAT(refusal(Endpoint::chat_completions,
                      R"({"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 3})").first,
              HasSubstr("at most 2"));
  EXPECT_EQ(refusal(Endpoint::generate, R"({"prompt": "x", "n": 2})").second, "n");
  EXPECT_EQ(refusal(Endpoint::generate, R"({"prompt": "x", "logprobs": 1})").second, "logprobs");
}

TEST(ApiRequest, MessageRoles) {
  const ApiRequest c = parse(Endpoint::chat_completions,
                             R"({"messages": [{"role": "developer", "content": "Be brief."},
                                              {"role": "user", "content": "Hi"},
                                              {"role": "assistant", "content": null},
                                              {"role": "user", "content": "again"}]})");
  ASSERT_EQ(c.messages.size(), 4u);
  EXPECT_EQ(c.messages[0].role, "system");
  EXPECT_EQ(c.messages[2].role, "assistant");
  EXPECT_EQ(c.messages[2].content, "");
  const auto [what, param] = refusal(Endpoint::chat_completions, R"({"messages": [{"role": "wizard", "content": "x"}]})");
  EXPECT_EQ(param, "messages[0].role");
  EXPECT_THAT(what, HasSubstr("must be system, developer, user or assistant, got \"wizard\""));
  EXPECT_EQ(refusal(Endpoint::chat_completions, R"({"messages": [{"role": "tool", "content": "x"}]})").second,
            "messages[0].role");
  EXPECT_EQ(refusal(Endpoint::chat_completions, R"({"messages": [{"role": "user", "content": null}]})").second,
            "messages[0].content");
}

}  // namespace
}  // namespace mosaic::serve

namespace mosaic::serve {
namespace {

TEST(ApiRequest, TokenEditingFields) {
  const ApiRequest r = parse(Endpoint::completions, R"({"prompt": "x", "editing_threshold": 0.5, "max_post_steps": 4})");
  ASSERT_TRUE(r.options.editing.has_value());
  EXPECT_EQ(r.options.editing->editing_threshold, 0.5);
  EXPECT_EQ(r.options.editing->max_post_steps, 4);
  EXPECT_EQ(r.options.editing->num_to_transfer, 1);
  EXPECT_FALSE(parse(Endpoint::completions, R"({"prompt": "x"})").options.editing.has_value());
  EXPECT_EQ(refusal(Endpoint::completions, R"({"prompt": "x", "editing_threshold": 2})").second, "editing_threshold");
  EXPECT_EQ(refusal(Endpoint::completions, R"({"prompt": "x", "num_to_transfer": 0})").second, "num_to_transfer");
}

TEST(ApiRequest, D2fFieldsAndTheServerDefault) {
  const ApiRequest r = parse(Endpoint::completions,
                             R"({"prompt": "x", "d2f": true, "skip_threshold": 0.9, "block_add_threshold": 0.1, "steps": 77})");
  ASSERT_TRUE(r.options.d2f.has_value());
  EXPECT_EQ(r.options.d2f->skip_threshold, 0.9);
  EXPECT_EQ(r.options.d2f->block_add_threshold, 0.1);
  EXPECT_EQ(r.options.d2f->decoded_token_threshold, D2fOptions{}.decoded_token_threshold);
  EXPECT_EQ(r.options.d2f->max_steps, 77);  // D2F's steps: the cap of its loop
  EXPECT_FALSE(parse(Endpoint::completions, R"({"prompt": "x"})").options.d2f.has_value());

  EXPECT_EQ(refusal(Endpoint::completions, R"({"prompt": "x", "skip_threshold": 0.9})").second, "skip_threshold");
  EXPECT_EQ(refusal(Endpoint::completions, R"({"prompt": "x", "d2f": true, "decoded_token_threshold": 1.5})").second,
            "decoded_token_threshold");
  EXPECT_EQ(refusal(Endpoint::completions, R"({"prompt": "x", "d2f": "yes"})").second, "d2f");

  RequestLimits server = limits();
  server.default_d2f = D2fOptions{.skip_threshold = 0.8};
  EXPECT_EQ(parse_api_request(Endpoint::completions, R"({"prompt": "x"})", server).options.d2f->skip_threshold, 0.8);
  EXPECT_FALSE(parse_api_request(Endpoint::completions, R"({"prompt": "x", "d2f": false})", server).options.d2f);
}

}  // namespace
}  // namespace mosaic::serve
